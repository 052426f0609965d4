// A Hugging Face tokenizer.json as GGUF `tokenizer.ggml.*` keys, so that a
// GGUF file made from a Hugging Face folder (tessera-quantize) carries its
// tokenizer, as llama.cpp's converter writes one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/gguf.h"

namespace tessera {

struct GgufTokenizerKeys {
  std::string model;                // tokenizer.ggml.model: "gpt2"
  std::string pre;                  // tokenizer.ggml.pre
  std::vector<std::string> tokens;  // by id
  std::vector<int32_t> token_types; // llama.cpp's token types, by id
  std::vector<std::string> merges;  // "left right", by rank
  int32_t bos = -1, eos = -1;       // -1: not written
  bool add_bos = false;
  // The type of tokenizer.json's normalizer (such as Qwen's "NFC"), which no
  // GGUF key carries: text it would change may tokenize differently from
  // the GGUF keys, as it does in llama.cpp. Empty when there is none.
  std::string dropped_normalizer;

  void WriteTo(GgufWriter& writer) const;
};

// Byte-level BPE tokenizer.json files (Llama 3, Qwen, GPT-2 and the like)
// become tokenizer.ggml.model "gpt2":
//   - tokens by id; an id with no entry is "[PAD<id>]", unused;
//   - token types: added special tokens control, other added tokens
//     user-defined, the rest normal;
//   - the merges as "left right";
//   - bos and eos from tokenizer_config.json (eos, when it names none, the
//     first of `eos_ids`, generation_config.json's); readers recognise the
//     other end-of-turn tokens by their text, as llama.cpp does;
//   - add_bos from the post-processor;
//   - tokenizer.ggml.pre: the first of llama.cpp's pre-tokenizer names whose
//     tokenizer gives exactly tokenizer.json's ids (without its normalizer,
//     see dropped_normalizer) on a check text of many scripts, digits,
//     whitespace runs, code and the added tokens' text.
// Other models (SentencePiece-style BPE with byte fallback, WordPiece...)
// are kUnimplemented; a byte-level tokenizer that no pre-tokenizer name
// reproduces is kFailedPrecondition.
absl::StatusOr<GgufTokenizerKeys> HfTokenizerToGguf(std::string_view tokenizer_json,
                                                    std::string_view tokenizer_config_json,
                                                    std::span<const int32_t> eos_ids);

}  // namespace tessera
