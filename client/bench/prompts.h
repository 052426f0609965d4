// Where benchmark prompts come from: a JSON-lines dataset or random token ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::bench {

// One prompt: text when `token_ids` is empty, else token ids.
struct Prompt {
  std::string text;
  std::vector<int32_t> token_ids;
};

// Parses JSON lines, each an object with a string field "prompt". Blank
// lines are skipped; anything else that is not such an object is an
// INVALID_ARGUMENT naming the line. No prompt at all is an error too.
absl::StatusOr<std::vector<std::string>> ParseDataset(std::string_view content);

// Reads and parses a dataset file.
absl::StatusOr<std::vector<std::string>> LoadDataset(const std::string& path);

// Lowest token id random prompts use: the first ids of most vocabularies are
// control tokens (unk, bos, eos, pad, byte fallbacks).
inline constexpr int32_t kMinRandomTokenId = 10;

// `length` ids drawn uniformly from [kMinRandomTokenId, vocab_size), the same
// for the same (seed, index).
std::vector<int32_t> RandomPromptIds(uint64_t seed, int64_t index, int length,
                                     int32_t vocab_size);

// The prompt of request `index`: dataset prompts in turn (cycling), or
// random token ids.
class PromptSource {
 public:
  static PromptSource FromDataset(std::vector<std::string> prompts);
  static PromptSource Random(int length, int32_t vocab_size, uint64_t seed);

  Prompt Get(int64_t index) const;

 private:
  std::vector<std::string> dataset_;
  int length_ = 0;
  int32_t vocab_size_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace tessera::bench
