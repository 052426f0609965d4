// The pre-tokenizers of GGUF byte-level BPE vocabularies, chosen by
// `tokenizer.ggml.pre` as llama.cpp chooses them. Private to engine/tokenizer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::tokenizer_internal {

struct BpePreTokenizer {
  std::string type;                   // llama.cpp's LLAMA_VOCAB_PRE_TYPE_* name, lower case
  std::vector<std::string> patterns;  // applied in order, each splitting the pieces of the last
  bool ignore_merges = false;         // a piece that is a token is emitted whole
  bool add_bos = false;               // default of tokenizer.ggml.add_bos_token
};

// `pre` is the value of tokenizer.ggml.pre, or empty when the key is absent
// (llama.cpp then uses its "default" splitting). Unknown names are refused.
absl::StatusOr<BpePreTokenizer> GgufBpePreTokenizer(std::string_view pre);

}  // namespace tessera::tokenizer_internal
