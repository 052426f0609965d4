// The BPE model of a tokenizer.json. Private to engine/tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/hf_json.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::tokenizer_internal {

class HfBpe {
 public:
  // `model` is tokenizer.json's "model" object.
  static absl::StatusOr<HfBpe> Parse(const Json& model);

  // Encodes one pre-tokenized word (already mapped to the byte alphabet for
  // byte-level tokenizers), as the Rust crate's BPE::tokenize does.
  void Encode(std::string_view word, std::vector<TokenId>* out) const;

  // Id of a vocabulary entry, or -1.
  TokenId Find(std::string_view text) const;
  // The vocabulary as a table by id; ids without an entry are empty.
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  absl::Status ParseVocab(const Json& vocab);
  absl::Status ParseMerges(const Json& merges);
  void InitialSymbols(std::string_view word, std::vector<TokenId>* ids) const;

  absl::flat_hash_map<std::string, TokenId> vocab_;
  std::vector<std::string> tokens_;
  // (left id, right id) -> (rank, merged id)
  absl::flat_hash_map<uint64_t, std::pair<int32_t, TokenId>> merges_;
  std::array<TokenId, 256> byte_ids_{};  // byte_fallback: the id of each "<0xXX>"
  TokenId unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
};

}  // namespace tessera::tokenizer_internal
