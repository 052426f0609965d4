// Random-weight llama / gpt2 models in GGUF form, with llama.cpp's tensor
// names and metadata keys (the logic behind tessera-make-model).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/gguf.h"

namespace tessera {

struct RandomModelSpec {
  std::string arch = "llama";  // llama | gpt2 | qwen2 | qwen3 | phi3 | gemma3
  std::string name;            // general.name; empty means "tessera-random-<arch>"
  uint32_t dim = 0;            // embedding length
  uint32_t layers = 0;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;  // 0 means heads; not gpt2, must divide heads
  uint32_t head_dim = 0;  // attention.key_length; 0 means dim / heads (not gpt2)
  uint32_t ffn = 0;       // feed-forward hidden size
  uint32_t context = 2048;
  // Token count. Required without vocab_from; with it, 0 or the source's count.
  uint32_t vocab_size = 0;
  GgmlType dtype = GgmlType::kF32;  // 2-D weights; norms and biases stay F32
  uint64_t seed = 0;
  bool tied = false;               // no output.weight; the head reuses token_embd
  std::optional<float> rope_base;  // <arch>.rope.freq_base, written only when set
  // "" or "llama3": a rope_freqs.weight tensor of Llama 3.1 frequency factors
  // (factor 8, low 1, high 4, original context 8192), llama only; or
  // "longrope": Phi-3.5's rope_factors_long/short.weight and attention
  // factor, trained at original_context, phi3 only.
  std::string rope_scaling;
  uint32_t original_context = 0;  // longrope: 0 < original_context < context
  uint32_t sliding_window = 0;          // gemma3 attention.sliding_window; 0 means 512
  std::optional<float> logit_softcap;   // gemma3 final_logit_softcapping
  float output_std = 0.02f;             // stddev of output.weight (or the tied embedding)
  // Stddev of the other matrices (not gpt2); projections back into the
  // residual stream get weight_std / sqrt(2 layers).
  float weight_std = 0.02f;
  // Source of every tokenizer.ggml.* key, copied verbatim; not owned and only
  // read during BuildRandomModel.
  const GgufFile* vocab_from = nullptr;
};

// INVALID_ARGUMENT naming the offending field when the spec is unusable.
absl::Status ValidateRandomModelSpec(const RandomModelSpec& spec);

// Adds the metadata, the vocabulary and every tensor to `writer`. Tensor
// bytes are generated lazily (AddTensorStreamed) from spec.seed, so writing
// never holds more than one tensor in memory; the same spec always yields
// the same bytes. Returns the total number of parameters.
absl::StatusOr<uint64_t> BuildRandomModel(const RandomModelSpec& spec, GgufWriter* writer);

// Synthetic SentencePiece-style vocab ("llama"): <unk>, <s>, </s>, the 256
// byte tokens <0x00>..<0xFF>, then distinct letter pieces. vocab_size >= 259.
absl::Status AddSyntheticLlamaVocab(uint32_t vocab_size, GgufWriter* writer);

// Synthetic byte-level BPE vocab ("gpt2"): the 256 byte characters in GPT-2
// order, merged letter pieces with their merges, and <|endoftext|> last (as
// bos and eos). vocab_size >= 257.
absl::Status AddSyntheticGpt2Vocab(uint32_t vocab_size, GgufWriter* writer);

// Copies every tokenizer.ggml.* key of `from`; returns its token count.
absl::StatusOr<uint32_t> CopyVocab(const GgufFile& from, GgufWriter* writer);

// GPT-2's bytes_to_unicode: the UTF-8 text of the character standing for
// each byte value (printable bytes map to themselves, others to U+0100...).
const std::array<std::string, 256>& Gpt2ByteToUnicode();

}  // namespace tessera
