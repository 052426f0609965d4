// Added-token matching, as tokenizers/src/tokenizer/added_vocabulary.rs does.

#include "engine/tokenizer/hf_added.h"

#include <unicode/uchar.h>

#include "engine/tokenizer/unicode.h"

namespace tessera::tokenizer_internal {
namespace {

// The codepoint that ends (back = true) or starts `text`, or -1.
int64_t EdgeCodepoint(std::string_view text, bool back) {
  if (text.empty()) return -1;
  size_t pos = 0;
  if (back) {
    pos = text.size() - 1;
    while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) --pos;
  }
  const Utf8Step step = DecodeUtf8(text.substr(pos));
  return step.status == Utf8Status::kValid ? static_cast<int64_t>(step.codepoint) : -1;
}

bool IsWordChar(int64_t cp) {
  return cp >= 0 && (u_isalnum(static_cast<UChar32>(cp)) || cp == '_');
}

bool IsSpace(int64_t cp) { return cp >= 0 && u_isUWhiteSpace(static_cast<UChar32>(cp)); }

// Byte length of the whitespace run that ends `text` / starts `text`.
size_t SpaceRunAtEnd(std::string_view text) {
  size_t n = text.size();
  while (n > 0) {
    size_t start = n - 1;
    while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
    if (!IsSpace(EdgeCodepoint(text.substr(start, n - start), false))) break;
    n = start;
  }
  return text.size() - n;
}

size_t SpaceRunAtStart(std::string_view text) {
  size_t n = 0;
  while (n < text.size()) {
    const Utf8Step step = DecodeUtf8(text.substr(n));
    if (step.status != Utf8Status::kValid || !IsSpace(step.codepoint)) break;
    n += step.len;
  }
  return n;
}

}  // namespace

void AddedTokenMatcher::Add(const AddedToken& token) {
  if (token.content.empty()) return;
  if (terminal_.empty()) terminal_.push_back(-1);
  int32_t node = 0;
  for (char c : token.content) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
    auto [it, inserted] = children_.try_emplace(key, static_cast<int32_t>(terminal_.size()));
    if (inserted) terminal_.push_back(-1);
    node = it->second;
  }
  // A repeated content keeps its first token, as the crate's trie does.
  if (terminal_[static_cast<size_t>(node)] < 0) {
    terminal_[static_cast<size_t>(node)] = static_cast<int32_t>(tokens_.size());
  }
  tokens_.push_back(&token);
  first_byte_[static_cast<uint8_t>(token.content[0])] = true;
}

int32_t AddedTokenMatcher::LongestAt(std::string_view text, size_t pos, size_t* len) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = children_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]));
    if (it == children_.end()) break;
    node = it->second;
    if (terminal_[static_cast<size_t>(node)] >= 0) {
      best = terminal_[static_cast<size_t>(node)];
      *len = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, bool skip_special,
                              std::vector<Fragment>* out) const {
  size_t start_offset = 0;
  size_t pos = 0;
  while (!tokens_.empty() && pos < text.size()) {
    size_t len = 0;
    const int32_t index =
        first_byte_[static_cast<uint8_t>(text[pos])] ? LongestAt(text, pos, &len) : -1;
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = *tokens_[static_cast<size_t>(index)];
    size_t start = pos, stop = pos + len;
    pos = stop;  // the search goes on after the match, whatever is done with it
    if (skip_special && tok.special) continue;
    if (tok.single_word) {
      const bool start_space = start == 0 || !IsWordChar(EdgeCodepoint(text.substr(0, start), true));
      const bool stop_space =
          stop == text.size() || !IsWordChar(EdgeCodepoint(text.substr(stop), false));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(start - SpaceRunAtEnd(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += SpaceRunAtStart(text.substr(stop));
    if (start_offset < start) out->push_back({-1, start_offset, start});
    out->push_back({tok.id, start, stop});
    start_offset = stop;
  }
  if (start_offset < text.size()) out->push_back({-1, start_offset, text.size()});
}

}  // namespace tessera::tokenizer_internal
