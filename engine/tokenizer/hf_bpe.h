// The BPE model of a tokenizer.json. Private to engine/tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/hf_json.h"
#include "engine/tokenizer/piece_cache.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace tessera::tokenizer_internal {

class HfBpe {
 public:
  // `model` is tokenizer.json's "model" object.
  static absl::StatusOr<HfBpe> Parse(const Json& model);

  // Encodes one pre-tokenized word (already mapped to the byte alphabet for
  // byte-level tokenizers), as the Rust crate's BPE::tokenize does. A long
  // word is encoded in parts, each found in or added to `parts` when given
  // (the ranges it keeps are of `out`).
  void Encode(std::string_view word, std::vector<TokenId>* out,
              PieceCache* parts = nullptr) const;

  // Encode without splitting a long word into parts: the same ids, slower
  // on long words (the tests compare the two).
  void EncodeWhole(std::string_view word, std::vector<TokenId>* out) const;

  // Id of a vocabulary entry, or -1.
  TokenId Find(std::string_view text) const;
  // The vocabulary as a table by id; ids without an entry are empty.
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  absl::Status ParseVocab(const Json& vocab);
  absl::Status ParseMerges(const Json& merges);
  // The word's first symbols; with `cps` and `starts`, also each one's code
  // point (kNotAChar for byte-fallback and unknown symbols) and the offset
  // of its character in the word.
  void InitialSymbols(std::string_view word, std::vector<TokenId>* ids,
                      std::vector<char32_t>* cps = nullptr,
                      std::vector<uint32_t>* starts = nullptr) const;
  // Encode for a long word: in parts between characters that no merge joins.
  void EncodeInParts(std::string_view word, std::vector<TokenId>* out, PieceCache* parts) const;
  // The id of one character (`step` from DecodeUtf8 at ch), or -1.
  TokenId CharId(const Utf8Step& step, std::string_view ch) const;
  // Applies the merges to symbols [0, n) of ids and appends the result.
  void MergeSymbols(const TokenId* ids, int32_t n, std::vector<TokenId>* out) const;

  absl::flat_hash_map<std::string, TokenId> vocab_;
  std::vector<std::string> tokens_;
  // The vocabulary's one-character entries by code point (a smaller table
  // than vocab_ for the lookup of every character of a text).
  absl::flat_hash_map<char32_t, TokenId> char_ids_;
  // (left id, right id) -> (rank, merged id)
  absl::flat_hash_map<uint64_t, std::pair<int32_t, TokenId>> merges_;
  // (last code point of left, first code point of right) of every merge:
  // no merge can join two characters whose pair is not here, so a long
  // word splits there into parts that BPE may encode apart.
  absl::flat_hash_set<uint64_t> joinable_;
  std::array<TokenId, 256> byte_ids_{};  // byte_fallback: the id of each "<0xXX>"
  TokenId unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
};

}  // namespace tessera::tokenizer_internal
