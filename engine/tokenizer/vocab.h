// Vocabulary data shared by the llama (SentencePiece BPE) and gpt2
// (byte-level BPE) tokenizers. Private to engine/tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::tokenizer_internal {

// This abseil build has its own string_view type, distinct from std's.
inline absl::string_view AsAbsl(std::string_view s) { return {s.data(), s.size()}; }

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
  TokenId bos = -1;
  TokenId eos = -1;
  TokenId unk = -1;
  TokenId eot = -1;
  bool add_bos = false;
  bool add_space_prefix = false;  // llama only
};

// Reads and validates the vocabulary metadata of a GGUF file.
absl::StatusOr<VocabData> ReadVocab(const GgufFile& file);

// The parts common to both tokenizers: token texts, types and the lookup of
// a token's text.
class VocabTokenizer : public Tokenizer {
 public:
  const std::string& TokenText(TokenId id) const override;
  bool IsControl(TokenId id) const override;

 protected:
  // Moves the tokens and types out of `vocab`.
  explicit VocabTokenizer(VocabData& vocab);

  bool InRange(TokenId id) const { return id >= 0 && id < vocab_size_; }
  TokenType type(TokenId id) const { return types_[static_cast<size_t>(id)]; }
  // Id of a token that plain text may produce (control, unknown and byte
  // tokens excluded, so "<s>" or "<0x41>" in the input stay ordinary text);
  // -1 when none.
  TokenId FindTextToken(std::string_view text) const;

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  TokenId unk_id_ = -1;

 private:
  // Holds duplicate texts at the last id, as llama.cpp does.
  absl::flat_hash_map<std::string, TokenId> text_to_id_;
};

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeLlamaTokenizer(VocabData vocab);
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeGpt2Tokenizer(VocabData vocab);

}  // namespace tessera::tokenizer_internal
