// Attention on the CPU over the paged KV cache:
//   out = softmax(q·Kᵀ·scale + M)·V
// where M is the additive causal mask (0 for keys at or before the query's
// position, −inf after it). Keys past a sequence's own kv_len do not exist
// for it, which is the padding mask: each sequence reads only its own blocks.
// Masked keys contribute exp(−inf) = 0, so their dot products are skipped.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"

namespace tessera::cpu {
namespace {

// Additive mask for query at absolute position q_pos against key position
// k_pos within one sequence.
inline float CausalMask(int32_t q_pos, int32_t k_pos) {
  return k_pos <= q_pos ? 0.0f : -std::numeric_limits<float>::infinity();
}

struct RowTask {
  int32_t seq;   // index into meta.seqs
  int32_t t;     // query row within the sequence's new tokens
};

}  // namespace

void CpuBackend::AttendOneRow(const float* q_row, const float* k_layer, const float* v_layer,
                              const AttentionSeq& seq, int32_t t, int32_t kv_head,
                              int32_t head_dim, float scale, int32_t block_size, float* scores,
                              float* out_row) const {
  const int32_t q_pos = seq.kv_len - seq.q_len + t;
  const int32_t visible = q_pos + 1;  // keys with CausalMask == 0
  const int64_t token_stride = static_cast<int64_t>(kv_shape_.num_kv_heads) * head_dim;
  float max_score = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j < visible; ++j) {
    const int32_t slot = seq.block_table[j / block_size] * block_size + j % block_size;
    const float* k = k_layer + slot * token_stride + kv_head * head_dim;
    float dot = 0.0f;
    for (int32_t d = 0; d < head_dim; ++d) dot += q_row[d] * k[d];
    scores[j] = dot * scale + CausalMask(q_pos, j);
    max_score = std::max(max_score, scores[j]);
  }
  double denom = 0.0;
  for (int32_t j = 0; j < visible; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    denom += scores[j];
  }
  const float inv = static_cast<float>(1.0 / denom);
  std::fill(out_row, out_row + head_dim, 0.0f);
  for (int32_t j = 0; j < visible; ++j) {
    const int32_t slot = seq.block_table[j / block_size] * block_size + j % block_size;
    const float* v = v_layer + slot * token_stride + kv_head * head_dim;
    const float p = scores[j] * inv;
    for (int32_t d = 0; d < head_dim; ++d) out_row[d] += p * v[d];
  }
}

void CpuBackend::Attention(int32_t layer, const float* q, const AttentionShape& shape,
                           const AttentionMetadata& meta, float* out) {
  std::vector<RowTask> tasks;
  tasks.reserve(meta.num_tokens);
  for (int32_t s = 0; s < static_cast<int32_t>(meta.seqs.size()); ++s) {
    for (int32_t t = 0; t < meta.seqs[s].q_len; ++t) tasks.push_back({s, t});
  }
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t row_stride = static_cast<int64_t>(shape.num_heads) * shape.head_dim;
  const float* k_layer = k_cache_[layer].data();
  const float* v_layer = v_cache_[layer].data();
  const int64_t total = static_cast<int64_t>(tasks.size()) * shape.num_heads;
  // Work per (row, head) grows with kv_len; split once there is enough.
  const int64_t min_items = std::max<int64_t>(1, 4096 / std::max(1, meta.max_kv_len));
  pool_.ParallelFor(total, min_items, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(meta.max_kv_len);
    for (int64_t item = begin; item < end; ++item) {
      const RowTask& task = tasks[item / shape.num_heads];
      const int32_t head = static_cast<int32_t>(item % shape.num_heads);
      const AttentionSeq& seq = meta.seqs[task.seq];
      const int64_t row = seq.q_start + task.t;
      AttendOneRow(q + row * row_stride + head * shape.head_dim, k_layer, v_layer, seq, task.t,
                   head / group, shape.head_dim, shape.scale, meta.block_size, scores.data(),
                   out + row * row_stride + head * shape.head_dim);
    }
  });
}

}  // namespace tessera::cpu
