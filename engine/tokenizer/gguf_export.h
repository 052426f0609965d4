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
  std::string model;                // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;                  // tokenizer.ggml.pre
  std::vector<std::string> tokens;  // by id
  std::vector<int32_t> token_types; // llama.cpp's token types, by id
  std::vector<std::string> merges;  // gpt2: "left right", by rank
  std::vector<float> scores;        // llama: by id
  int32_t bos = -1, eos = -1, unk = -1;  // -1: not written
  bool add_bos = false;
  bool add_space_prefix = false;    // llama
  // The type of tokenizer.json's normalizer (such as Qwen's "NFC"), which no
  // GGUF key carries: text it would change may tokenize differently from
  // the GGUF keys, as it does in llama.cpp. Empty when there is none.
  std::string dropped_normalizer;
  // Why the keys give other ids than tokenizer.json for some texts, when
  // they are checked against a tokenizer.json changed to what GGUF can say
  // (a Metaspace pre-tokenizer as add_space_prefix). Empty when exact.
  std::string inexact;

  void WriteTo(GgufWriter& writer) const;
};

// Byte-level BPE tokenizer.json files (Llama 3, Qwen, GPT-2 and the like)
// become tokenizer.ggml.model "gpt2" (tokens, types and special ids are
// read the same way for both kinds):
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
// SentencePiece-style BPE files (byte fallback, spaces replaced by U+2581
// in the normalizer, maybe a U+2581 prepended: Llama 2, Mistral, Gemma)
// become tokenizer.ggml.model "llama": each token's score is minus the rank
// of the first merge that makes it (SentencePiece merges the best-scored
// pair), "<0xXX>" tokens are bytes, and a prepended U+2581 is
// add_space_prefix. The result is checked on the same text. The same files
// in the form transformers writes with legacy = false (no normalizer; a
// Metaspace pre-tokenizer that does not split) are written the same way and
// checked against the legacy form; with prepend_scheme "first" or "always",
// `inexact` says where the two differ.
// Other models (WordPiece, Unigram...) are kUnimplemented; keys that do not
// reproduce tokenizer.json's ids are kFailedPrecondition.
absl::StatusOr<GgufTokenizerKeys> HfTokenizerToGguf(std::string_view tokenizer_json,
                                                    std::string_view tokenizer_config_json,
                                                    std::span<const int32_t> eos_ids);

}  // namespace tessera
