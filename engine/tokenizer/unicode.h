// UTF-8 decoding for the tokenizers.
// Private to engine/tokenizer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera::tokenizer_internal {

enum class Utf8Status {
  kValid,       // a complete, well-formed character
  kIncomplete,  // a well-formed prefix cut off by the end of the input
  kInvalid,     // can never become well-formed
};

struct Utf8Step {
  Utf8Status status;
  // kValid: bytes of the character. kIncomplete: all of the input.
  // kInvalid: the maximal ill-formed subpart (>= 1 byte), which is replaced
  // by one U+FFFD as the Unicode standard recommends.
  size_t len;
  char32_t codepoint;  // meaningful for kValid only
};

// Decodes the character at the start of `text`, which must be non-empty.
// Strict: overlongs, surrogates and values above U+10FFFF are invalid.
Utf8Step DecodeUtf8(std::string_view text);

// Decodes the character at the end of `text`, which must be non-empty:
// kInvalid unless `text` ends with a whole well-formed character.
Utf8Step DecodeLastUtf8(std::string_view text);

// Appends the UTF-8 encoding of `cp` (cp <= U+10FFFF).
void AppendUtf8(char32_t cp, std::string* out);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Copies the longest prefix of `bytes` that does not end inside an
// incomplete character, replacing invalid subparts by U+FFFD. Returns how
// many bytes were consumed; the rest is an incomplete character.
size_t AppendSanitizedUtf8(std::string_view bytes, std::string* out);


}  // namespace tessera::tokenizer_internal
