// Typed views of a model's weights, prepared on the backend. Matrices are
// row-major [out_features, in_features].
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/model/config.h"

namespace tessera {

class GgufFile;

// Absent optional weights have data == nullptr.
struct LayerWeights {
  Weight attn_norm;     // [1, dim]
  Weight attn_norm_b;   // [1, dim] (gpt2)
  Weight wq, wk, wv;    // [q_dim, dim], [kv_dim, dim], [kv_dim, dim]; views of attn_qkv when fused
  Weight bq, bk, bv;    // [1, q_dim], [1, kv_dim], [1, kv_dim] (gpt2, qwen2)
  Weight q_norm, k_norm;  // [1, head_dim] (qwen3, gemma3)
  Weight wo;            // [dim, q_dim]
  Weight bo;            // [1, dim] (gpt2)
  Weight attn_post_norm;  // [1, dim] (gemma3)
  Weight ffn_norm;      // [1, dim]
  Weight ffn_norm_b;    // [1, dim] (gpt2)
  Weight w_gate;        // [ffn, dim]; a view of ffn_up's first half when fused (phi3)
  Weight w_up;          // [ffn, dim]
  Weight b_up;          // [1, ffn] (gpt2)
  Weight w_down;        // [dim, ffn]
  Weight b_down;        // [1, dim] (gpt2)
  Weight ffn_post_norm;  // [1, dim] (gemma3)
};

struct ModelWeights {
  Weight token_embedding;     // [vocab, dim]
  Weight position_embedding;  // [context, dim] (gpt2)
  std::vector<LayerWeights> layers;
  Weight output_norm;         // [1, dim]
  Weight output_norm_b;       // [1, dim] (gpt2)
  Weight output;              // [vocab, dim]; the token embedding when tied
  Weight rope_freqs;          // [1, rope_dim / 2] frequency factors (llama3), optional
  bool tied_output = false;
  int64_t num_parameters = 0;
  std::string dtype_name;     // of the matrices: "f16", "q8_0", or a mix as "q4_K+q6_K"
};

// Finds, shape-checks and prepares every tensor the architecture needs;
// a tensor of the file that the architecture does not use is refused.
absl::StatusOr<ModelWeights> LoadWeights(const GgufFile& file, const ModelConfig& config,
                                         Backend& backend);

}  // namespace tessera
