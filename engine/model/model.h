// A loaded decoder-only transformer and its forward pass over a batch of
// sequences (packed tokens, paged KV cache).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace tessera {

class GgufFile;

// One engine step's input, in host memory. Tokens of all sequences are
// packed one sequence after another (no padding).
struct StepBatch {
  std::vector<int32_t> token_ids;    // [num_tokens]
  std::vector<int32_t> positions;    // [num_tokens]: absolute position in its sequence
  AttentionMetadata attention;       // per-sequence slices and KV slot mapping
  std::vector<int32_t> sample_rows;  // [num_sampled]: rows whose logits are wanted
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
};

class Model {
 public:
  // Reads the config and weights; `file` must outlive the model.
  // `max_context` caps the context length (0: the file's; LimitContext).
  static absl::StatusOr<std::unique_ptr<Model>> Load(const GgufFile& file,
                                                     std::unique_ptr<Backend> backend,
                                                     int32_t max_batched_tokens,
                                                     int32_t max_sampled_rows,
                                                     int32_t max_context = 0);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Backend& backend() { return *backend_; }
  int32_t max_batched_tokens() const { return max_tokens_; }

  // Allocates the KV cache for `num_blocks` blocks of `block_size` tokens,
  // stored as `dtype`.
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size, DType dtype);
  size_t KvBytesPerBlock(int32_t block_size, DType dtype) const;

  // Runs the layers over the batch, appending its K/V to the cache, and
  // writes logits [sample_rows.size(), vocab] to `logits` (host memory).
  absl::Status Forward(const StepBatch& batch, std::span<float> logits);

 private:
  Model(const ModelConfig& config, std::unique_ptr<Backend> backend);
  absl::Status AllocateActivations(int32_t max_tokens, int32_t max_sampled);
  void AttentionBlock(int32_t layer, int32_t n, const AttentionMetadata& meta);
  void FeedForwardBlock(int32_t layer, int32_t n);
  void Norm(const float* x, const Weight& w, const Weight& b, int32_t n, float* out);
  void QkNormAndRope(int32_t layer, int32_t n);

  ModelConfig config_;
  std::unique_ptr<Backend> backend_;
  ModelWeights weights_;
  AttentionShape attention_shape_;          // global layers
  AttentionShape sliding_attention_shape_;  // sliding-window layers
  int32_t max_tokens_ = 0;
  int32_t max_sampled_ = 0;

  // Activations in backend memory, sized for max_tokens_ rows.
  std::unique_ptr<Buffer> x_;        // [T, dim] residual stream
  std::unique_ptr<Buffer> xb_;       // [T, dim] normed input / block output
  std::unique_ptr<Buffer> q_;        // [T, q_dim]
  std::unique_ptr<Buffer> k_;        // [T, kv_dim]
  std::unique_ptr<Buffer> v_;        // [T, kv_dim]
  std::unique_ptr<Buffer> att_;      // [T, q_dim] attention output
  std::unique_ptr<Buffer> hb_;       // [T, ffn]
  std::unique_ptr<Buffer> hb2_;      // [T, ffn]
  std::unique_ptr<Buffer> ids_;      // [T] int32
  std::unique_ptr<Buffer> pos_;      // [T] int32
  std::unique_ptr<Buffer> rows_;     // [S] int32 sampled rows
  std::unique_ptr<Buffer> last_;     // [S, dim] gathered rows
  std::unique_ptr<Buffer> last_n_;   // [S, dim] normed gathered rows
  std::unique_ptr<Buffer> logits_;   // [S, vocab]
};

}  // namespace tessera
