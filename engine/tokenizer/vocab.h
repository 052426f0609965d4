// Vocabulary data shared by the llama (SentencePiece BPE) and gpt2
// (byte-level BPE) tokenizers. Private to engine/tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tokenizer/piece_cache.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::tokenizer_internal {

// This abseil build has its own string_view type, distinct from std's.
inline absl::string_view AsAbsl(std::string_view s) { return {s.data(), s.size()}; }

// True for SentencePiece byte pieces "<0xXX>" (upper-case hex).
bool IsBytePiece(std::string_view text);

// Values of `tokenizer.ggml.token_type`, as llama.cpp numbers them.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Everything read and validated from `tokenizer.ggml.*`.
struct VocabData {
  std::string model;                // "llama" or "gpt2"
  std::vector<std::string> tokens;  // [vocab_size], all non-empty
  std::vector<TokenType> types;     // [vocab_size]
  std::vector<float> scores;        // [vocab_size] (llama; zeros when absent)
  std::vector<std::string> merges;  // gpt2: "left right", lowest rank first
  std::string pre;                  // tokenizer.ggml.pre; empty when absent
  std::string name;                 // general.name, lower-cased
  TokenId bos = -1;
  TokenId eos = -1;
  TokenId unk = -1;
  TokenId eot = -1;
  TokenId eom = -1;
  std::vector<TokenId> eog;  // every id that ends generation, as llama.cpp finds them
  bool add_bos = false;
  bool add_space_prefix = false;  // llama only
};

// llama.cpp's token attributes that matter for matching special tokens.
inline constexpr uint8_t kStripLeft = 1;   // swallow ASCII whitespace before the token
inline constexpr uint8_t kStripRight = 2;  // swallow ASCII whitespace after the token

// A run of the input: either text[begin, end) or one special token.
struct Fragment {
  TokenId token;  // -1 for text
  size_t begin;
  size_t end;
};

// Reads and validates the vocabulary metadata of a GGUF file.
absl::StatusOr<VocabData> ReadVocab(const GgufFile& file);

// Finds EOT, EOM and the other end-of-generation tokens by their text where
// the file does not name them, and marks them as control tokens, as llama.cpp
// does (fills v->eot, v->eom, v->eog and updates v->types).
void FindEndOfGeneration(VocabData* v);

// The parts common to both tokenizers: token texts, types, the lookup of a
// token's text and the matching of special tokens in the input.
class VocabTokenizer : public Tokenizer {
 public:
  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options) const override;
  const std::string& TokenText(TokenId id) const override;
  bool IsControl(TokenId id) const override;

 protected:
  // Moves the tokens and types out of `vocab`.
  explicit VocabTokenizer(VocabData& vocab);

  // Tokenizes one text fragment; `after_special` is true at the start of
  // the input and after a special token. `cache` holds what earlier
  // fragments of the same call encoded.
  virtual void EncodeFragment(std::string_view text, bool after_special, PieceCache* cache,
                              std::vector<TokenId>* out) const = 0;

  bool InRange(TokenId id) const { return id >= 0 && id < vocab_size_; }
  TokenType type(TokenId id) const { return types_[static_cast<size_t>(id)]; }
  // Id of the token with exactly this text, whatever its type (llama.cpp's
  // text_to_token); -1 when none.
  TokenId FindToken(std::string_view text) const;

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  TokenId unk_id_ = -1;

 private:
  // llama.cpp's tokenizer_st_partition: control, unknown (only when
  // `parse_special`) and user-defined tokens found in the text, longest first.
  std::vector<Fragment> Partition(std::string_view text, bool parse_special) const;
  // Builds the special-token list; `name` (general.name) selects llama.cpp's
  // per-model strip attributes (Phi-3).
  void InitSpecialTokens(std::string_view name);
  void SplitAt(TokenId id, std::string_view text, const std::vector<Fragment>& in,
               std::vector<Fragment>* out) const;

  // Holds duplicate texts at the last id.
  absl::flat_hash_map<std::string, TokenId> text_to_id_;
  std::vector<TokenId> special_ids_;  // by decreasing text length
  // Index in special_ids_ by text (views into tokens_); the first bytes of
  // one-byte special texts; the first two bytes of the longer ones (a bit
  // per pair, SpecialStart), and by those two bytes their distinct lengths.
  absl::flat_hash_map<absl::string_view, size_t> special_index_;
  std::array<bool, 256> special_single_{};
  std::array<uint8_t, 8192> special_starts_{};
  absl::flat_hash_map<uint16_t, std::vector<size_t>> special_lengths_;
  static uint16_t SpecialStart(std::string_view t) {
    return static_cast<uint16_t>(static_cast<uint8_t>(t[0]) << 8 | static_cast<uint8_t>(t[1]));
  }
  std::vector<uint8_t> strip_;        // kStrip* bits per id
};

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeLlamaTokenizer(VocabData vocab);
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeGpt2Tokenizer(VocabData vocab);

}  // namespace tessera::tokenizer_internal
