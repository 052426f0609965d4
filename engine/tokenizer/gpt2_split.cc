// GPT-2's pre-tokenizer regex, evaluated by hand over classified codepoints.

#include "engine/tokenizer/gpt2_split.h"

#include <cstdint>

#include "engine/tokenizer/unicode.h"

namespace tessera::tokenizer_internal {
namespace {

struct Char {
  size_t offset;  // byte offset in the text
  char32_t cp;    // 0xFFFFFFFF for an ill-formed byte
  CharClass cls;
};

std::vector<Char> Classify(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = DecodeUtf8(text.substr(pos));
    if (step.status == Utf8Status::kValid) {
      chars.push_back({pos, step.codepoint, ClassifyCodepoint(step.codepoint)});
      pos += step.len;
    } else {
      chars.push_back({pos, 0xFFFFFFFF, CharClass::kOther});
      ++pos;
    }
  }
  return chars;
}

// End of the contraction ('s 't 're 've 'm 'll 'd, lower case only)
// starting at i, or i when there is none.
size_t MatchContraction(const std::vector<Char>& c, size_t i) {
  const size_t n = c.size();
  if (c[i].cp != '\'' || i + 1 >= n) return i;
  const char32_t a = c[i + 1].cp;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 >= n) return i;
  const char32_t b = c[i + 2].cp;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return i;
}

// End of the regex match starting at chars[i].
size_t MatchAt(const std::vector<Char>& c, size_t i) {
  const size_t n = c.size();
  if (size_t end = MatchContraction(c, i); end != i) return end;
  // " ?\p{L}+", " ?\p{N}+" and " ?[^\s\p{L}\p{N}]+": one optional space,
  // then a run of one class.
  size_t start = i;
  if (c[i].cp == ' ' && i + 1 < n && c[i + 1].cls != CharClass::kWhitespace) start = i + 1;
  if (c[start].cls != CharClass::kWhitespace) {
    size_t end = start + 1;
    while (end < n && c[end].cls == c[start].cls) ++end;
    return end;
  }
  // "\s+(?!\S)|\s+": a whitespace run that is followed by a non-space
  // leaves its last character to the next match (which then starts with
  // that space), unless the run is a single character.
  size_t end = i + 1;
  while (end < n && c[end].cls == CharClass::kWhitespace) ++end;
  if (end == n || end - i == 1) return end;
  return end - 1;
}

}  // namespace

void SplitGpt2Words(std::string_view text, std::vector<std::string_view>* words) {
  const std::vector<Char> chars = Classify(text);
  for (size_t i = 0; i < chars.size();) {
    const size_t end = MatchAt(chars, i);
    const size_t from = chars[i].offset;
    const size_t to = end < chars.size() ? chars[end].offset : text.size();
    words->push_back(text.substr(from, to - from));
    i = end;
  }
}

}  // namespace tessera::tokenizer_internal
