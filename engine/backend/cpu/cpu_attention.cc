// Attention on the CPU:  out = softmax(q·Kᵀ·scale + M)·V
//
// M is the seed notes' additive mask: causal (−inf for keys after the
// query's position, offset by what the sequence already had cached) plus
// padding (−inf for key slots past the sequence's own length).
//
// Decode rows (one new token) read K and V straight from the paged cache.
// Prefill sequences of a step are laid out padded, as a batch:
// Q [B, H, T_q_max, d] and K, V [B, H_kv, T_k_max, d] gathered from the
// cache, then every (sequence, head) pair runs the masked product Q·Kᵀ,
// the row softmax and the product with V; padded query rows are dropped.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend/cpu/attention_kernels.h"
#include "engine/backend/cpu/cpu_backend.h"

namespace tessera::cpu {

void AttendRowPortable(const float* q, const KeyBlocks& k, const KvRows& v, int32_t head_dim,
                       float scale, int32_t visible, float* scores, float* out) {
  float max_score = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j < visible; ++j) {
    const float* block = k.Block(j / k.block_size);
    const int32_t o = j % k.block_size;
    float dot = 0.0f;
    for (int32_t d = 0; d < head_dim; ++d) dot += q[d] * block[int64_t{d} * k.block_size + o];
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double denom = 0.0;
  for (int32_t j = 0; j < visible; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    denom += scores[j];
  }
  const float inv = static_cast<float>(1.0 / denom);
  std::fill(out, out + head_dim, 0.0f);
  v.ForEach(visible, [&](int32_t j, const float* vr) {
    const float p = scores[j] * inv;
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p * vr[d];
  });
}

AttendRowFn SelectAttendRow() {
  static const AttendRowFn fn = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") ? &AttendRowAvx512
                                                                              : &AttendRowPortable;
  }();
  return fn;
}

namespace {

// Number of keys query row t of `seq` may see: the mask is 0 for keys before
// or at its position and −inf after it and past the sequence's length.
int32_t VisibleKeys(const AttentionSeq& seq, int32_t t) {
  return std::min(seq.kv_len, seq.kv_len - seq.q_len + t + 1);
}

}  // namespace

void CpuBackend::DecodeAttention(int32_t layer, const float* q, const AttentionShape& shape,
                                 const AttentionMetadata& meta,
                                 const std::vector<int32_t>& decode_seqs, float* out) {
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t row_stride = int64_t{shape.num_heads} * shape.head_dim;
  const int64_t token_stride = int64_t{kv_shape_.num_kv_heads} * kv_shape_.head_dim;
  const int64_t total = static_cast<int64_t>(decode_seqs.size()) * shape.num_heads;
  const AttendRowFn attend = SelectAttendRow();
  pool_.ParallelFor(total, std::max<int64_t>(1, 4096 / std::max(1, meta.max_kv_len)),
                    [&](int64_t begin, int64_t end) {
    std::vector<float> scores(meta.max_kv_len);
    for (int64_t item = begin; item < end; ++item) {
      const AttentionSeq& seq = meta.seqs[decode_seqs[item / shape.num_heads]];
      const int32_t head = static_cast<int32_t>(item % shape.num_heads);
      const int64_t head_offset = int64_t{head / group} * shape.head_dim;
      const KeyBlocks k = PagedKeys(layer, seq, head / group);
      const KvRows v{v_cache_[layer]->f32(), seq.block_table, meta.block_size, token_stride,
                     head_offset};
      const int64_t row = seq.q_start;
      attend(q + row * row_stride + head * shape.head_dim, k, v, shape.head_dim, shape.scale,
             VisibleKeys(seq, 0), scores.data(), out + row * row_stride + head * shape.head_dim);
    }
  });
}

// The keys of sequence `seq`, KV head g, in the paged cache.
KeyBlocks CpuBackend::PagedKeys(int32_t layer, const AttentionSeq& seq, int32_t g) const {
  const int64_t block_floats =
      int64_t{kv_shape_.num_kv_heads} * kv_shape_.head_dim * kv_shape_.block_size;
  return KeyBlocks{k_cache_[layer]->f32(), seq.block_table, kv_shape_.block_size, block_floats,
                   int64_t{g} * kv_shape_.head_dim * kv_shape_.block_size};
}

// Copies the prefill sequences' K and V from the paged cache into the padded
// layouts, zeros in padding slots: K as [B, H_kv, d, T_k_pad] (transposed,
// one block per sequence) and V as [B, H_kv, T_k_pad, d].
void CpuBackend::GatherPadded(int32_t layer, const AttentionMetadata& meta,
                              const std::vector<int32_t>& prefill_seqs, int32_t t_k_pad) {
  const int32_t kv_heads = kv_shape_.num_kv_heads, d = kv_shape_.head_dim;
  const int32_t bs = kv_shape_.block_size;
  const size_t per_seq = size_t(kv_heads) * t_k_pad * d;
  k_padded_.assign(prefill_seqs.size() * per_seq, 0.0f);
  v_padded_.assign(prefill_seqs.size() * per_seq, 0.0f);
  const int64_t token_stride = int64_t{kv_heads} * d;
  pool_.ParallelFor(static_cast<int64_t>(prefill_seqs.size()) * kv_heads, 1,
                    [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const AttentionSeq& seq = meta.seqs[prefill_seqs[item / kv_heads]];
      const int32_t g = static_cast<int32_t>(item % kv_heads);
      const KeyBlocks k = PagedKeys(layer, seq, g);
      const KvRows v{v_cache_[layer]->f32(), seq.block_table, bs, token_stride, g * d};
      float* kd = k_padded_.data() + item * size_t(t_k_pad) * d;
      float* vd = v_padded_.data() + item * size_t(t_k_pad) * d;
      for (int32_t b = 0, j0 = 0; j0 < seq.kv_len; ++b, j0 += bs) {
        const int32_t n = std::min(bs, seq.kv_len - j0);
        for (int32_t dd = 0; dd < d; ++dd) {
          std::memcpy(kd + int64_t{dd} * t_k_pad + j0, k.Block(b) + int64_t{dd} * bs,
                      n * sizeof(float));
        }
      }
      v.ForEach(seq.kv_len, [&](int32_t j, const float* row) {
        std::memcpy(vd + size_t(j) * d, row, d * sizeof(float));
      });
    }
  });
}

void CpuBackend::PrefillAttention(int32_t layer, const float* q, const AttentionShape& shape,
                                  const AttentionMetadata& meta,
                                  const std::vector<int32_t>& prefill_seqs, float* out) {
  int32_t t_q_max = 0, t_k_max = 0;
  for (int32_t s : prefill_seqs) {
    t_q_max = std::max(t_q_max, meta.seqs[s].q_len);
    t_k_max = std::max(t_k_max, meta.seqs[s].kv_len);
  }
  // Key slots rounded up to whole vectors of 16.
  const int32_t t_k_pad = (t_k_max + 15) / 16 * 16;
  GatherPadded(layer, meta, prefill_seqs, t_k_pad);
  const int32_t group = shape.num_heads / shape.num_kv_heads, d = shape.head_dim;
  const int64_t row_stride = int64_t{shape.num_heads} * d;
  const AttendRowFn attend = SelectAttendRow();
  // One (sequence, head, query row) per item, over the padded [B, H, T_q_max]
  // grid; items in padded query rows are dropped.
  const int64_t total = static_cast<int64_t>(prefill_seqs.size()) * shape.num_heads * t_q_max;
  pool_.ParallelFor(total, std::max<int64_t>(1, 4096 / std::max(1, t_k_max)),
                    [&](int64_t begin, int64_t end) {
    std::vector<float> scores(t_k_max);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / (int64_t{shape.num_heads} * t_q_max);
      const int32_t head = static_cast<int32_t>((item / t_q_max) % shape.num_heads);
      const int32_t t = static_cast<int32_t>(item % t_q_max);
      const AttentionSeq& seq = meta.seqs[prefill_seqs[b]];
      if (t >= seq.q_len) continue;  // padded query row
      const int64_t kv_item = b * shape.num_kv_heads + head / group;
      const KeyBlocks k{k_padded_.data() + kv_item * size_t(t_k_pad) * d, nullptr, t_k_pad, 0, 0};
      const KvRows v{v_padded_.data() + kv_item * size_t(t_k_pad) * d, nullptr, 0, d, 0};
      const int64_t row = seq.q_start + t;
      attend(q + row * row_stride + head * d, k, v, d, shape.scale, VisibleKeys(seq, t),
             scores.data(), out + row * row_stride + head * d);
    }
  });
}

void CpuBackend::Attention(int32_t layer, const float* q, const AttentionShape& shape,
                           const AttentionMetadata& meta, float* out) {
  std::vector<int32_t> decode_seqs, prefill_seqs;
  for (int32_t s = 0; s < static_cast<int32_t>(meta.seqs.size()); ++s) {
    (meta.seqs[s].q_len == 1 ? decode_seqs : prefill_seqs).push_back(s);
  }
  if (!prefill_seqs.empty()) PrefillAttention(layer, q, shape, meta, prefill_seqs, out);
  if (!decode_seqs.empty()) DecodeAttention(layer, q, shape, meta, decode_seqs, out);
}

}  // namespace tessera::cpu
