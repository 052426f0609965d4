// Tokenizers built from Hugging Face `tokenizer.json` files (the BPE model).
// Private to engine/tokenizer; callers use Tokenizer::FromHuggingFace.
//
// Supported, as the Rust `tokenizers` crate defines them:
//   normalizer:    NFC, NFD, NFKC, NFKD (ICU), Replace (String or Regex
//                  pattern), Prepend, Sequence, null
//   pre_tokenizer: Split (String or Regex pattern, all five behaviours,
//                  invert), ByteLevel (add_prefix_space, use_regex), Sequence,
//                  null
//   model:         BPE with vocab + merges, unk_token, fuse_unk, byte_fallback,
//                  ignore_merges (no dropout, no subword prefix/suffix)
//   added_tokens:  matched before the model, leftmost-longest, with lstrip,
//                  rstrip, single_word and normalized
//   post_processor: TemplateProcessing (the special ids around "A"),
//                  ByteLevel, Sequence, null
//   decoder:       ByteLevel, Replace, ByteFallback, Fuse, Strip, Sequence, null
// Anything else is refused with an error that names it.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::tokenizer_internal {

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeHfTokenizer(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config_json);

}  // namespace tessera::tokenizer_internal
