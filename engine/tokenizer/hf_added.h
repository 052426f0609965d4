// Matching Hugging Face added tokens in text. Private to engine/tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {

struct AddedToken {
  TokenId id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// The added tokens of one kind (normalized or not), found as the Rust crate's
// AddedVocabulary::find_matches finds them: leftmost-longest, non-
// overlapping, then single_word, lstrip and rstrip applied.
class AddedTokenMatcher {
 public:
  void Add(const AddedToken& token);  // the token must outlive the matcher
  bool empty() const { return tokens_.empty(); }

  // Splits `text` into fragments. With `skip_special`, special tokens are
  // not matched (their text stays text).
  void Split(std::string_view text, bool skip_special, std::vector<Fragment>* out) const;

 private:
  // The longest token starting at `pos`, or -1 (an index into tokens_).
  int32_t LongestAt(std::string_view text, size_t pos, size_t* len) const;

  std::vector<const AddedToken*> tokens_;
  // Trie over bytes: (node << 8 | byte) -> child; node 0 is the root.
  absl::flat_hash_map<uint64_t, int32_t> children_;
  std::vector<int32_t> terminal_;  // per node: index into tokens_, or -1
  std::array<bool, 256> first_byte_{};
};

}  // namespace tessera::tokenizer_internal
