// Model hyperparameters, read from GGUF metadata with the keys and defaults
// llama.cpp's converter writes and its loader reads. An architecture is data:
// the optional pieces below switch parts of the one layer loop (model.cc) on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/model/rope_tensors.h"

namespace tessera {

class GgufFile;

enum class Architecture {
  kLlama,   // RMSNorm, RoPE (adjacent pairs), GQA, SwiGLU; optional rope_freqs
  kGpt2,    // LayerNorm with bias, learned positions, fused QKV, GELU MLP
  kQwen2,   // llama + Q/K/V biases, NEOX RoPE
  kQwen3,   // llama + per-head RMSNorm on Q and K, NEOX RoPE
  kPhi3,    // llama with fused QKV and fused gate/up, NEOX RoPE
  kGemma3,  // Q/K norms, post norms, GELU-tanh gated FFN, sliding-window layers
};

enum class NormKind { kRms, kLayer };
enum class FfnKind {
  kSwiGlu,     // down(silu(gate) * up)
  kGeGluTanh,  // down(gelu_tanh(gate) * up)
  kGelu,       // down(gelu_tanh(up + b) ) + b (gpt2)
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;        // general.architecture
  std::string name;             // general.name, may be empty
  int32_t vocab_size = 0;
  int32_t dim = 0;              // embedding width
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;     // == num_heads without GQA
  int32_t head_dim = 0;         // attention.key_length, else dim / num_heads
  int32_t q_dim = 0;            // num_heads * head_dim (may differ from dim)
  int32_t kv_dim = 0;           // num_kv_heads * head_dim
  int32_t ffn_dim = 0;
  int32_t context_length = 0;
  float norm_eps = 1e-5f;
  NormKind norm = NormKind::kRms;
  FfnKind ffn = FfnKind::kSwiGlu;

  // --- optional pieces ---
  bool learned_positions = false;  // position_embd table (gpt2)
  bool linear_biases = false;      // biases on every linear layer (gpt2)
  bool qkv_bias = false;           // biases on Q, K and V only (qwen2)
  bool fused_qkv = false;          // one attn_qkv matrix, Q then K then V rows
  bool fused_gate_up = false;      // ffn_up holds gate rows then up rows (phi3)
  bool qk_norm = false;            // per-head RMSNorm of Q and K before RoPE
  bool post_norms = false;         // RMSNorm of the attention and FFN outputs
  bool use_rope = true;            // false for gpt2
  RopeStyle rope_style = RopeStyle::kAdjacent;
  int32_t rope_dim = 0;            // rotated dims per head
  float rope_base = 10000.0f;      // rope.freq_base
  float rope_freq_scale = 1.0f;    // 1 / rope.scaling.factor (linear scaling)
  bool rope_freq_factors = false;  // rope_factors_tensor divides the frequencies
  // The F32 [rope_dim / 2] tensor of frequency factors: rope_freqs.weight
  // (llama3), or for Phi-3 long-rope the long or the short factors, as the
  // context is longer than rope_original_context or not (ChooseRopeFactors);
  // rope_factors_unused names the other, read but not used.
  std::string rope_factors_tensor = kRopeFreqsTensor;
  std::string rope_factors_unused;
  int32_t rope_original_context = 0;  // Phi-3 long-rope: the context it was trained at
  float rope_attn_factor = 1.0f;      // RoPE's cos and sin are multiplied by it (mscale)
  float embedding_scale = 0.0f;    // embeddings are multiplied by it when > 0
  float attention_scale = 0.0f;    // softmax scale; 1/sqrt(head_dim) when 0
  int32_t sliding_window = 0;      // keys per query on sliding layers; 0: none
  std::vector<uint8_t> layer_sliding;  // [num_layers]: 1 where the window applies
  float rope_base_sliding = 10000.0f;  // rope base of sliding layers (gemma3)
  float final_logit_softcap = 0.0f;    // logits = c * tanh(logits / c) when > 0

  bool IsSlidingLayer(int32_t layer) const {
    return sliding_window > 0 && layer_sliding[layer] != 0;
  }
};

// Reads and validates the hyperparameters of a supported file; any key under
// the architecture's prefix that this reader does not know is refused.
absl::StatusOr<ModelConfig> ReadModelConfig(const GgufFile& file);

// Caps the context at `max_context` (0: the file's) and, for Phi-3
// long-rope, picks the factors for that context as llama.cpp does: the long
// ones when it is longer than the training context, else the short ones.
absl::Status LimitContext(ModelConfig& c, int32_t max_context);

}  // namespace tessera
