// Strict UTF-8 decoding (Unicode 15, table 3-7 "well-formed byte sequences").

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace tessera {
namespace tokenizer_internal {

Utf8Step DecodeUtf8(std::string_view text) {
  const auto b0 = static_cast<uint8_t>(text[0]);
  if (b0 < 0x80) return {Utf8Status::kValid, 1, b0};
  size_t need = 0;  // continuation bytes after the lead byte
  char32_t cp = 0;
  // Allowed range of the first continuation byte; it excludes overlongs
  // (E0, F0), surrogates (ED) and values above U+10FFFF (F4).
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Status::kInvalid, 1, 0};
  }
  for (size_t i = 1; i <= need; ++i) {
    if (i >= text.size()) return {Utf8Status::kIncomplete, text.size(), 0};
    const auto b = static_cast<uint8_t>(text[i]);
    if (b < lo || b > hi) return {Utf8Status::kInvalid, i, 0};
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  return {Utf8Status::kValid, need + 1, cp};
}

Utf8Step DecodeLastUtf8(std::string_view text) {
  size_t start = text.size() - 1;
  // A character takes at most 4 bytes: its lead byte and 3 continuations.
  while (start > 0 && text.size() - start < 4 &&
         (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  const Utf8Step step = DecodeUtf8(text.substr(start));
  if (step.status == Utf8Status::kValid && start + step.len == text.size()) return step;
  return {Utf8Status::kInvalid, 1, 0};
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t AppendSanitizedUtf8(std::string_view bytes, std::string* out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // Copy ASCII runs without decoding them one by one.
    size_t ascii_end = pos;
    while (ascii_end < bytes.size() && static_cast<uint8_t>(bytes[ascii_end]) < 0x80) {
      ++ascii_end;
    }
    out->append(bytes.substr(pos, ascii_end - pos));
    pos = ascii_end;
    if (pos == bytes.size()) break;
    const Utf8Step step = DecodeUtf8(bytes.substr(pos));
    if (step.status == Utf8Status::kIncomplete) return pos;
    if (step.status == Utf8Status::kValid) {
      out->append(bytes.substr(pos, step.len));
    } else {
      out->append(kReplacementChar);
    }
    pos += step.len;
  }
  return pos;
}

}  // namespace tokenizer_internal

bool IsValidUtf8(std::string_view text) {
  using tokenizer_internal::DecodeUtf8;
  using tokenizer_internal::Utf8Status;
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const auto step = DecodeUtf8(text.substr(pos));
    if (step.status != Utf8Status::kValid) return false;
    pos += step.len;
  }
  return true;
}

}  // namespace tessera
