// tokenizer.ggml.model = "llama": SentencePiece BPE. Adjacent symbols are
// merged greedily, always taking the pair whose concatenation is the vocab
// token with the highest score (leftmost on ties); symbols left over that
// are not tokens fall back to <0xXX> byte tokens.

#include <array>
#include <cstdint>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";   // U+2581, SentencePiece's space
constexpr std::string_view kUnknownPiece = "\xE2\x96\x85";  // U+2585, as llama.cpp shows <unk>
constexpr char32_t kAnyChar = 0xFFFFFFFF;  // not a code point

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte of a "<0xXX>" piece, or -1.
int BytePieceValue(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = HexDigit(text[3]), lo = HexDigit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// "<0xXX>" with upper-case hex, the spelling byte fallback looks for.
std::string BytePieceName(int b) {
  constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

// A run of text: one UTF-8 character at first, then merged runs. Symbols
// form a doubly linked list; merged-away symbols keep len == 0.
struct Symbol {
  size_t start;
  size_t len;
  int64_t prev;
  int64_t next;
};

struct Bigram {
  float score;
  int64_t left;
  int64_t right;
  size_t len;  // bytes of the merged text, to detect stale entries
};

// Highest score on top; among equal scores, the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class LlamaTokenizer final : public VocabTokenizer {
 public:
  explicit LlamaTokenizer(VocabData& vocab);

  std::string TokenBytes(TokenId id) const override;
  std::string_view model_name() const override { return "llama"; }

 private:
  void EncodeFragment(std::string_view text, bool after_special, PieceCache* cache,
                      std::vector<TokenId>* out) const override;
  void EncodeEscaped(std::string_view text, PieceCache* cache, std::vector<TokenId>* out) const;
  void EncodeRun(std::string_view text, std::vector<TokenId>* out) const;
  void EmitPiece(std::string_view piece, std::vector<TokenId>* out) const;

  std::vector<float> scores_;               // [vocab_size]
  std::array<TokenId, 256> byte_tokens_{};  // token of each byte, -1 when none
  // Characters that some token holds right before a U+2581: before any
  // other, no merge can join across a U+2581.
  absl::flat_hash_set<char32_t> before_space_;
};

LlamaTokenizer::LlamaTokenizer(VocabData& vocab)
    : VocabTokenizer(vocab), scores_(std::move(vocab.scores)) {
  byte_tokens_.fill(-1);
  // Byte fallback looks pieces up by text whatever their type, as llama.cpp
  // does; a vocab without <0xXX> may still have single-byte pieces.
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const int b = BytePieceValue(tokens_[i]);
    if (b >= 0 && tokens_[i] == BytePieceName(b)) byte_tokens_[b] = static_cast<TokenId>(i);
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_tokens_[b] < 0) byte_tokens_[b] = FindToken(std::string(1, static_cast<char>(b)));
  }
  for (const std::string& token : tokens_) {
    for (size_t at = token.find(kSpaceMarker, 1); at != std::string::npos;
         at = token.find(kSpaceMarker, at + 1)) {
      const Utf8Step step = DecodeLastUtf8(std::string_view(token).substr(0, at));
      // A byte that is not a whole character here marks every character.
      before_space_.insert(step.status == Utf8Status::kValid ? step.codepoint : kAnyChar);
    }
  }
}

// As llama.cpp: a space is prefixed to the text at the start of the input
// and after each special token.
void LlamaTokenizer::EncodeFragment(std::string_view text, bool after_special,
                                    PieceCache* cache, std::vector<TokenId>* out) const {
  std::string escaped;
  escaped.reserve(text.size() + text.size() / 4 + kSpaceMarker.size());
  if (add_space_prefix_ && after_special) escaped.append(kSpaceMarker);
  for (char c : text) {
    if (c == ' ') {
      escaped.append(kSpaceMarker);
    } else {
      escaped.push_back(c);
    }
  }
  if (!escaped.empty()) EncodeEscaped(escaped, cache, out);
}

// A merge across a U+2581 would make a token that holds the character
// before it and the U+2581, so where no token holds that pair the text
// splits into runs that merge independently; each distinct run is merged
// once per call. Short texts are merged whole.
void LlamaTokenizer::EncodeEscaped(std::string_view text, PieceCache* cache,
                                   std::vector<TokenId>* out) const {
  if (text.size() < kLongPieceBytes || before_space_.contains(kAnyChar)) {
    return EncodeRun(text, out);
  }
  auto run = [&](size_t begin, size_t end) {
    const std::string_view part = text.substr(begin, end - begin);
    if (cache->CopyTo(part, out)) return;
    const size_t first = out->size();
    EncodeRun(part, out);
    cache->Remember(part, first, *out);
  };
  size_t begin = 0;
  char32_t prev = kAnyChar;  // the previous character, kAnyChar after an ill-formed byte
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = DecodeUtf8(text.substr(pos));
    const bool valid = step.status == Utf8Status::kValid;
    if (valid && pos > begin && prev != kAnyChar && text.substr(pos, step.len) == kSpaceMarker &&
        !before_space_.contains(prev)) {
      run(begin, pos);
      begin = pos;
    }
    prev = valid ? step.codepoint : kAnyChar;
    pos += valid ? step.len : 1;
  }
  run(begin, text.size());
}

void LlamaTokenizer::EncodeRun(std::string_view text, std::vector<TokenId>* out) const {
  std::vector<Symbol> syms;
  syms.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = DecodeUtf8(text.substr(pos));
    // Ill-formed bytes become one-byte symbols that only byte fallback emits.
    const size_t len = step.status == Utf8Status::kValid ? step.len : 1;
    const auto index = static_cast<int64_t>(syms.size());
    syms.push_back({pos, len, index - 1, index + 1});
    pos += len;
  }
  syms.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const size_t len = syms[left].len + syms[right].len;
    const TokenId id = FindToken(text.substr(syms[left].start, len));
    if (id >= 0) queue.push({scores_[static_cast<size_t>(id)], left, right, len});
  };
  for (size_t i = 1; i < syms.size(); ++i)
    try_add(static_cast<int64_t>(i) - 1, static_cast<int64_t>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = syms[b.left];
    Symbol& right = syms[b.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.len) continue;  // stale
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }
  for (int64_t i = 0; i >= 0; i = syms[i].next) {
    EmitPiece(text.substr(syms[i].start, syms[i].len), out);
  }
}

void LlamaTokenizer::EmitPiece(std::string_view piece, std::vector<TokenId>* out) const {
  const TokenId id = FindToken(piece);
  if (id >= 0) {
    out->push_back(id);
    return;
  }
  for (char c : piece) {
    if (byte_tokens_[static_cast<uint8_t>(c)] < 0) {
      // Without byte tokens the whole piece becomes one <unk>, as in
      // SentencePiece.
      if (unk_id_ >= 0) out->push_back(unk_id_);
      return;
    }
  }
  for (char c : piece) out->push_back(byte_tokens_[static_cast<uint8_t>(c)]);
}

std::string LlamaTokenizer::TokenBytes(TokenId id) const {
  if (!InRange(id)) return "";
  const std::string& text = tokens_[static_cast<size_t>(id)];
  switch (type(id)) {
    case TokenType::kControl:
      return "";
    case TokenType::kUnknown:
      return std::string(kUnknownPiece);
    case TokenType::kUserDefined:
      return text;
    case TokenType::kByte: {
      const int b = BytePieceValue(text);
      return b >= 0 ? std::string(1, static_cast<char>(b)) : text;
    }
    default:
      break;
  }
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (std::string_view(text).substr(pos, kSpaceMarker.size()) == kSpaceMarker) {
      bytes.push_back(' ');
      pos += kSpaceMarker.size();
    } else {
      bytes.push_back(text[pos++]);
    }
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeLlamaTokenizer(VocabData vocab) {
  return std::unique_ptr<Tokenizer>(new LlamaTokenizer(vocab));
}

}  // namespace tessera::tokenizer_internal
