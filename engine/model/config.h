// Model hyperparameters, read from GGUF metadata with the same defaults the
// format's reference implementation uses.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tessera {

class GgufFile;

enum class Architecture {
  kLlama,  // RMSNorm, RoPE (adjacent pairs), GQA, SwiGLU
  kGpt2,   // LayerNorm with bias, learned positions, fused QKV, GELU MLP
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;        // "llama" | "gpt2"
  std::string name;             // general.name, may be empty
  int32_t vocab_size = 0;
  int32_t dim = 0;              // embedding width
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;     // == num_heads without GQA
  int32_t head_dim = 0;         // dim / num_heads
  int32_t kv_dim = 0;           // num_kv_heads * head_dim
  int32_t ffn_dim = 0;
  int32_t context_length = 0;
  int32_t rope_dim = 0;         // rotated dims per head (llama)
  float rope_base = 10000.0f;   // llama.rope.freq_base, 10000 when absent
  float norm_eps = 1e-5f;
};

// Reads and validates the hyperparameters of a llama or gpt2 file.
absl::StatusOr<ModelConfig> ReadModelConfig(const GgufFile& file);

}  // namespace tessera
