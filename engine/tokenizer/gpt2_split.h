// GPT-2's pre-tokenizer. Private to engine/tokenizer.
#pragma once

#include <string_view>
#include <vector>

namespace tessera::tokenizer_internal {

// Splits text as GPT-2's regex does:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// The pieces are views into `text` and concatenate to it. Bytes that are not
// well-formed UTF-8 count as one-byte [^\s\p{L}\p{N}] characters.
void SplitGpt2Words(std::string_view text, std::vector<std::string_view>* words);

}  // namespace tessera::tokenizer_internal
