// tokenizer.ggml.model = "gpt2": byte-level BPE. The text is split by the
// pre-tokenizer that tokenizer.ggml.pre names; each piece's bytes are mapped
// to GPT-2's printable byte alphabet and merged pairwise by merge rank,
// lowest rank first, as llama.cpp's llm_tokenizer_bpe_session does.

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/bpe_pre.h"
#include "engine/tokenizer/regex_split.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {
namespace {

// The byte alphabet uses codepoints below this bound (256 + 68).
constexpr char32_t kAlphabetEnd = 324;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes map, in order, to U+0100 upward.
std::array<char32_t, 256> ByteToCodepoint() {
  std::array<char32_t, 256> map{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    map[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return map;
}

struct Symbol {
  size_t start;  // in the mapped word
  size_t len;    // 0 once merged into its left neighbour
  int64_t prev;
  int64_t next;
  int32_t part;  // id of the text as a merge side, -1 when it is none
};

struct Bigram {
  int32_t rank;
  int64_t left;
  int64_t right;
  size_t len;  // bytes of the merged text, to detect stale entries
};

// Lowest rank on top; among equal ranks, the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Buffers reused across the words of one Encode call.
struct Scratch {
  std::string mapped;
  std::vector<Symbol> syms;
  std::vector<Bigram> heap;
};

class Gpt2Tokenizer final : public VocabTokenizer {
 public:
  explicit Gpt2Tokenizer(VocabData& vocab);
  absl::Status BuildMerges(const std::vector<std::string>& merges);
  absl::Status BuildPreTokenizer(std::string_view pre);

  std::string TokenBytes(TokenId id) const override;
  std::string_view model_name() const override { return "gpt2"; }

 private:
  void EncodeFragment(std::string_view text, bool after_special, PieceCache* cache,
                      std::vector<TokenId>* out) const override;
  void EncodeWord(std::string_view word, Scratch* s, std::vector<TokenId>* out) const;
  void MergeSymbols(Scratch* s) const;
  void EmitPiece(std::string_view piece, std::vector<TokenId>* out) const;
  int32_t PartId(std::string_view text) const;
  int32_t Rank(int32_t left_part, int32_t right_part) const;

  std::array<std::string, 256> byte_to_utf8_;            // UTF-8 of each byte's stand-in
  std::array<int16_t, kAlphabetEnd> codepoint_to_byte_;  // -1 off the alphabet
  // Every distinct side of a merge gets a dense id; a pair of ids keys the rank.
  absl::flat_hash_map<std::string, int32_t> part_ids_;
  absl::flat_hash_map<uint64_t, int32_t> ranks_;
  std::vector<std::unique_ptr<Regex>> split_;
  bool ignore_merges_ = false;
};

Gpt2Tokenizer::Gpt2Tokenizer(VocabData& vocab) : VocabTokenizer(vocab) {
  codepoint_to_byte_.fill(-1);
  const std::array<char32_t, 256> map = ByteToCodepoint();
  for (int b = 0; b < 256; ++b) {
    AppendUtf8(map[b], &byte_to_utf8_[b]);
    codepoint_to_byte_[map[b]] = static_cast<int16_t>(b);
  }
}

absl::Status Gpt2Tokenizer::BuildMerges(const std::vector<std::string>& merges) {
  if (merges.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("too many merges: ", merges.size()));
  }
  part_ids_.reserve(merges.size());
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view m = merges[i];
    const size_t space = m.find(' ', 1);  // validated by ReadVocab
    int32_t parts[2];
    const std::string_view sides[2] = {m.substr(0, space), m.substr(space + 1)};
    for (int k = 0; k < 2; ++k) {
      auto [it, inserted] =
          part_ids_.try_emplace(AsAbsl(sides[k]), static_cast<int32_t>(part_ids_.size()));
      parts[k] = it->second;
    }
    const uint64_t key = (static_cast<uint64_t>(parts[0]) << 32) | static_cast<uint32_t>(parts[1]);
    // A repeated pair keeps its first (best) rank.
    ranks_.try_emplace(key, static_cast<int32_t>(i));
  }
  return absl::OkStatus();
}

int32_t Gpt2Tokenizer::PartId(std::string_view text) const {
  auto it = part_ids_.find(AsAbsl(text));
  return it == part_ids_.end() ? -1 : it->second;
}

int32_t Gpt2Tokenizer::Rank(int32_t left_part, int32_t right_part) const {
  if (left_part < 0 || right_part < 0) return -1;
  auto it =
      ranks_.find((static_cast<uint64_t>(left_part) << 32) | static_cast<uint32_t>(right_part));
  return it == ranks_.end() ? -1 : it->second;
}

absl::Status Gpt2Tokenizer::BuildPreTokenizer(std::string_view pre) {
  auto spec = GgufBpePreTokenizer(pre);
  if (!spec.ok()) return spec.status();
  for (const std::string& pattern : spec->patterns) {
    auto regex = Regex::Compile(pattern);
    if (!regex.ok()) return regex.status();
    split_.push_back(*std::move(regex));
  }
  ignore_merges_ = spec->ignore_merges;
  return absl::OkStatus();
}

void Gpt2Tokenizer::EncodeFragment(std::string_view text, bool /*after_special*/,
                                   PieceCache* cache, std::vector<TokenId>* out) const {
  std::vector<std::string_view> words = {text};
  for (const auto& regex : split_) SplitPieces(*regex, SplitBehavior::kIsolated, false, &words);
  Scratch scratch;
  // Words seen before in this call are not merged again.
  for (std::string_view word : words) {
    if (cache->CopyTo(word, out)) continue;
    const size_t first = out->size();
    EncodeWord(word, &scratch, out);
    cache->Remember(word, first, *out);
  }
}

void Gpt2Tokenizer::EncodeWord(std::string_view word, Scratch* s, std::vector<TokenId>* out) const {
  s->mapped.clear();
  s->syms.clear();
  for (char c : word) {
    const std::string& piece = byte_to_utf8_[static_cast<uint8_t>(c)];
    const auto index = static_cast<int64_t>(s->syms.size());
    s->syms.push_back({s->mapped.size(), piece.size(), index - 1, index + 1, PartId(piece)});
    s->mapped += piece;
  }
  if (s->syms.empty()) return;
  s->syms.back().next = -1;
  if (ignore_merges_) {
    // Llama 3: a word that is a token is not merged piece by piece.
    const TokenId id = FindToken(s->mapped);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  MergeSymbols(s);
  const std::string_view mapped = s->mapped;
  for (int64_t i = 0; i >= 0; i = s->syms[i].next) {
    EmitPiece(mapped.substr(s->syms[i].start, s->syms[i].len), out);
  }
}

void Gpt2Tokenizer::MergeSymbols(Scratch* s) const {
  std::vector<Symbol>& syms = s->syms;
  std::vector<Bigram>& heap = s->heap;  // a binary heap ordered by BigramOrder
  heap.clear();
  auto try_add = [&](int64_t left, int64_t right) {
    if (left < 0 || right < 0) return;
    const int32_t rank = Rank(syms[left].part, syms[right].part);
    if (rank < 0) return;
    heap.push_back({rank, left, right, syms[left].len + syms[right].len});
    std::push_heap(heap.begin(), heap.end(), BigramOrder());
  };
  for (size_t i = 1; i < syms.size(); ++i)
    try_add(static_cast<int64_t>(i) - 1, static_cast<int64_t>(i));

  const std::string_view mapped = s->mapped;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), BigramOrder());
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& left = syms[b.left];
    Symbol& right = syms[b.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.len) continue;  // stale
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = b.left;
    left.part = PartId(mapped.substr(left.start, left.len));
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }
}

void Gpt2Tokenizer::EmitPiece(std::string_view piece, std::vector<TokenId>* out) const {
  const TokenId id = FindToken(piece);
  if (id >= 0) {
    out->push_back(id);
    return;
  }
  // A merge result that is not a token: llama.cpp looks up each byte of its
  // text alone and drops the bytes that are no token.
  for (size_t pos = 0; pos < piece.size(); ++pos) {
    const TokenId byte_id = FindToken(piece.substr(pos, 1));
    if (byte_id >= 0) out->push_back(byte_id);
  }
}

std::string Gpt2Tokenizer::TokenBytes(TokenId id) const {
  if (!InRange(id)) return "";
  const std::string& text = tokens_[static_cast<size_t>(id)];
  const TokenType t = type(id);
  if (t == TokenType::kControl) return "";
  if (t == TokenType::kUserDefined) return text;
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = DecodeUtf8(std::string_view(text).substr(pos));
    if (step.status == Utf8Status::kValid && step.codepoint < kAlphabetEnd &&
        codepoint_to_byte_[step.codepoint] >= 0) {
      bytes.push_back(static_cast<char>(codepoint_to_byte_[step.codepoint]));
      pos += step.len;
    } else {
      // Off the byte alphabet: keep the text as stored.
      const size_t len = step.status == Utf8Status::kValid ? step.len : 1;
      bytes.append(text, pos, len);
      pos += len;
    }
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeGpt2Tokenizer(VocabData vocab) {
  auto tokenizer = std::make_unique<Gpt2Tokenizer>(vocab);
  if (absl::Status s = tokenizer->BuildMerges(vocab.merges); !s.ok()) return s;
  if (absl::Status s = tokenizer->BuildPreTokenizer(vocab.pre); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace tessera::tokenizer_internal
