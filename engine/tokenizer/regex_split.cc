// PCRE2 patterns and the splitting of pre-tokenizer pieces.

#include "engine/tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace tessera::tokenizer_internal {
namespace {

// Per thread: one match block (only the whole match is read) and a match
// context with a JIT stack of up to 1 MiB, for patterns whose repeats
// backtrack deeply over long pieces; the default is 32 KiB.
struct ThreadMatch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  ThreadMatch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadMatch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  ThreadMatch(const ThreadMatch&) = delete;
  ThreadMatch& operator=(const ThreadMatch&) = delete;
};

ThreadMatch& ThisThreadMatch() {
  thread_local ThreadMatch m;
  return m;
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
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern) {
  if (!IsValidUtf8(pattern)) return absl::InvalidArgumentError("regex is not valid UTF-8");
  std::unique_ptr<Regex> regex(new Regex());
  regex->impl_ = std::make_unique<Impl>();
  regex->pattern_ = std::string(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  regex->impl_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex->pattern_.data()), regex->pattern_.size(),
                    PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (regex->impl_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("bad regex \"", regex->pattern_, "\" at ",
                                                   offset, ": ",
                                                   reinterpret_cast<const char*>(message)));
  }
  // Without the JIT (a CPU it does not support), pcre2_match interprets.
  pcre2_jit_compile(regex->impl_->code, PCRE2_JIT_COMPLETE);
  return regex;
}

Regex::~Regex() = default;

bool Regex::Search(std::string_view text, size_t from, size_t* begin, size_t* end) const {
  ThreadMatch& m = ThisThreadMatch();
  // The caller checked the UTF-8 (regex_split.h): PCRE2 would check the
  // whole text again on every call otherwise.
  const int r = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                            from, PCRE2_NO_UTF_CHECK, m.data, m.context);
  // PCRE2_ERROR_NOMATCH, or an error such as the match limit: no match.
  if (r < 0) return false;
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(m.data);
  *begin = ovector[0];
  *end = ovector[1];
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
