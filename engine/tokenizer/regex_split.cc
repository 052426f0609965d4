// Oniguruma patterns and the splitting of pre-tokenizer pieces.

#include "engine/tokenizer/regex_split.h"

#include <oniguruma.h>

#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace tessera::tokenizer_internal {
namespace {

void InitializeOniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

// One match region and match parameter set per thread, reused by every
// search (setting them up per search costs more than many matches).
struct SearchState {
  OnigRegion* region = onig_region_new();
  OnigMatchParam* param = onig_new_match_param();
  SearchState() { onig_initialize_match_param(param); }
  ~SearchState() {
    onig_region_free(region, 1);
    onig_free_match_param(param);
  }
};

SearchState& ThreadSearchState() {
  thread_local SearchState state;
  return state;
}

struct Span {
  size_t begin;
  size_t end;
  bool match;
};

// The matches and the gaps between them, covering all of `text`.
std::vector<Span> FindSpans(const Regex& regex, std::string_view text, bool invert) {
  std::vector<Span> spans;
  size_t pos = 0, prev = 0;
  size_t b = 0, e = 0;
  while (pos <= text.size() && regex.Search(text, pos, &b, &e)) {
    if (e == b) {  // an empty match splits nothing; step over one character
      if (b >= text.size()) break;
      const Utf8Step step = DecodeUtf8(text.substr(b));
      pos = b + (step.status == Utf8Status::kValid ? step.len : 1);
      continue;
    }
    if (b > prev) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = pos = e;
  }
  if (prev < text.size()) spans.push_back({prev, text.size(), invert});
  return spans;
}

// Hugging Face's fold of the spans for each behaviour.
std::vector<Span> Merge(std::vector<Span> spans, SplitBehavior behavior) {
  std::vector<Span> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      return spans;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.match) out.push_back(s);
      }
      return out;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.match;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->match;
      }
      return std::vector<Span>(out.rbegin(), out.rend());
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.match;
      }
      return out;
  }
  return spans;
}

// A copy of ill-formed text with each bad subpart replaced by U+FFFD, and
// for each byte offset of the copy the offset in the original.
struct Sanitized {
  std::string text;
  std::vector<size_t> to_original;  // [text.size() + 1]
};

Sanitized Sanitize(std::string_view text) {
  Sanitized s;
  s.text.reserve(text.size() + 8);
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = DecodeUtf8(text.substr(pos));
    const size_t len = step.status == Utf8Status::kValid ? step.len : std::max<size_t>(step.len, 1);
    if (step.status == Utf8Status::kValid) {
      s.text.append(text.substr(pos, len));
    } else {
      s.text.append(kReplacementChar);
    }
    while (s.to_original.size() < s.text.size()) s.to_original.push_back(pos);
    pos += len;
  }
  s.to_original.push_back(text.size());
  return s;
}

void SplitOne(const Regex& regex, SplitBehavior behavior, bool invert, std::string_view piece,
              std::vector<std::string_view>* out) {
  if (IsValidUtf8(piece)) {
    for (const Span& s : Merge(FindSpans(regex, piece, invert), behavior)) {
      if (s.end > s.begin) out->push_back(piece.substr(s.begin, s.end - s.begin));
    }
    return;
  }
  const Sanitized clean = Sanitize(piece);
  for (const Span& s : Merge(FindSpans(regex, clean.text, invert), behavior)) {
    const size_t b = clean.to_original[s.begin], e = clean.to_original[s.end];
    if (e > b) out->push_back(piece.substr(b, e - b));
  }
}

}  // namespace

struct Regex::Impl {
  regex_t* reg = nullptr;
  ~Impl() {
    if (reg != nullptr) onig_free(reg);
  }
};

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern) {
  InitializeOniguruma();
  if (!IsValidUtf8(pattern)) return absl::InvalidArgumentError("regex is not valid UTF-8");
  std::unique_ptr<Regex> regex(new Regex());
  regex->impl_ = std::make_unique<Impl>();
  regex->pattern_ = std::string(pattern);
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(regex->pattern_.data());
  const int r = onig_new(&regex->impl_->reg, begin, begin + regex->pattern_.size(),
                         ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (r != ONIG_NORMAL) {
    regex->impl_->reg = nullptr;
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, r, &info);
    return absl::InvalidArgumentError(absl::StrCat("bad regex \"", regex->pattern_,
                                                   "\": ", reinterpret_cast<char*>(message)));
  }
  return regex;
}

Regex::~Regex() = default;

bool Regex::Search(std::string_view text, size_t from, size_t* begin, size_t* end) const {
  SearchState& state = ThreadSearchState();
  OnigRegion* region = state.region;
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* stop = str + text.size();
  // Most matches start where the last one ended: try there first, which is
  // the leftmost match when it succeeds.
  if (from < text.size()) {
    const int len = onig_match_with_param(impl_->reg, str, stop, str + from, region,
                                          ONIG_OPTION_NONE, state.param);
    if (len >= 0) {
      *begin = from;
      *end = from + static_cast<size_t>(len);
      return true;
    }
  }
  const int r = onig_search_with_param(impl_->reg, str, stop, str + from, stop, region,
                                       ONIG_OPTION_NONE, state.param);
  // ONIG_MISMATCH, or an error such as the backtracking limit: no match.
  if (r < 0) return false;
  *begin = static_cast<size_t>(region->beg[0]);
  *end = static_cast<size_t>(region->end[0]);
  return true;
}

void SplitPieces(const Regex& regex, SplitBehavior behavior, bool invert,
                 std::vector<std::string_view>* pieces) {
  std::vector<std::string_view> out;
  out.reserve(pieces->size() * 2);
  for (std::string_view piece : *pieces) SplitOne(regex, behavior, invert, piece, &out);
  pieces->swap(out);
}

}  // namespace tessera::tokenizer_internal
