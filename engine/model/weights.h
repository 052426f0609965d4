// Typed views of a model's weights, prepared on the backend. Matrices are
// row-major [out_features, in_features].
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/model/config.h"

namespace tessera {

class GgufFile;

struct LayerWeights {
  Weight attn_norm;     // [1, dim]
  Weight attn_norm_b;   // [1, dim] (gpt2)
  Weight wq, wk, wv;    // [dim, dim], [kv_dim, dim], [kv_dim, dim]; gpt2: views of attn_qkv
  Weight bq, bk, bv;    // [1, dim], [1, kv_dim], [1, kv_dim] (gpt2)
  Weight wo;            // [dim, dim]
  Weight bo;            // [1, dim] (gpt2)
  Weight ffn_norm;      // [1, dim]
  Weight ffn_norm_b;    // [1, dim] (gpt2)
  Weight w_gate;        // [ffn, dim] (llama)
  Weight w_up;          // [ffn, dim]
  Weight b_up;          // [1, ffn] (gpt2)
  Weight w_down;        // [dim, ffn]
  Weight b_down;        // [1, dim] (gpt2)
};

struct ModelWeights {
  Weight token_embedding;     // [vocab, dim]
  Weight position_embedding;  // [context, dim] (gpt2)
  std::vector<LayerWeights> layers;
  Weight output_norm;         // [1, dim]
  Weight output_norm_b;       // [1, dim] (gpt2)
  Weight output;              // [vocab, dim]; the token embedding when tied
  int64_t num_parameters = 0;
  std::string dtype_name;     // "f32" | "f16" | "bf16" | "mixed" (of the matrices)
};

// Finds, shape-checks and prepares every tensor the architecture needs.
absl::StatusOr<ModelWeights> LoadWeights(const GgufFile& file, const ModelConfig& config,
                                         Backend& backend);

}  // namespace tessera
