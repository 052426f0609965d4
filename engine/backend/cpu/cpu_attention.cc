// Attention on the CPU:  out = softmax(q·Kᵀ·scale + M)·V
//
// M is the seed notes' additive mask: causal (−inf for keys after the
// query's position, offset by what the sequence already had cached) plus
// padding (−inf for key slots past the sequence's own length).
//
// Decode rows (one new token) read K and V straight from the paged cache.
// Prefill sequences of a step are laid out padded, as a batch:
// Q [B, H, T_q_max, d] and K, V [B, H_kv, T_k_pad, d] gathered from the
// cache, then every (sequence, head) pair runs the masked product Q·Kᵀ,
// the row softmax and the product with V; padded query rows are dropped.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend/cpu/attention_kernels.h"
#include "engine/backend/cpu/kernels.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/float16.h"

namespace tessera::cpu {
namespace {

inline float ToFloat(float x) { return x; }
inline float ToFloat(uint16_t h) { return HalfToFloat(h); }
inline float ToFloat(int8_t q) { return static_cast<float>(q); }  // the scale comes apart

// Number of keys query row t of `seq` may see: the mask is 0 for keys before
// or at its position and −inf after it and past the sequence's length.
int32_t VisibleKeys(const AttentionSeq& seq, int32_t t) {
  return std::min(seq.kv_len, seq.kv_len - seq.q_len + t + 1);
}

// First key query row t may see: with a sliding window of w keys, a query
// at position p sees positions (p - w, p] (llama.cpp's standard SWA mask).
int32_t FirstKey(const AttentionSeq& seq, int32_t t, int32_t window) {
  if (window <= 0) return 0;
  return std::max(0, seq.kv_len - seq.q_len + t - window + 1);
}

}  // namespace

template <typename T>
void AttendRowPortable(const float* q, const KeyBlocksT<T>& k, const KvRowsT<T>& v,
                       int32_t head_dim, float scale, int32_t first, int32_t visible,
                       float* scores, float* out) {
  float max_score = -std::numeric_limits<float>::infinity();
  for (int32_t j = first; j < visible; ++j) {
    const T* block = k.Block(j / k.block_size);
    const int32_t o = j % k.block_size;
    float dot = 0.0f;
    for (int32_t d = 0; d < head_dim; ++d) {
      dot += q[d] * ToFloat(block[int64_t{d} * k.block_size + o]);
    }
    scores[j] = dot * scale;
    if constexpr (kScaledKv<T>) scores[j] *= k.Scales(j / k.block_size)[o];
    max_score = std::max(max_score, scores[j]);
  }
  double denom = 0.0;
  for (int32_t j = first; j < visible; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    denom += scores[j];
  }
  const float inv = static_cast<float>(1.0 / denom);
  std::fill(out, out + head_dim, 0.0f);
  v.ForEach(visible, [&](int32_t j, const T* vr) {
    if (j < first) return;
    float p = scores[j] * inv;
    if constexpr (kScaledKv<T>) p *= v.Scales(j / v.block_size)[j % v.block_size];
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p * ToFloat(vr[d]);
  });
}

template <typename T>
AttendRowFn<T> SelectAttendRow() {
  switch (SelectedKernelPath()) {
    case CpuKernelPath::kAvx512: return &AttendRowAvx512<T>;
    case CpuKernelPath::kAvx2: return &AttendRowAvx2<T>;
    default: return &AttendRowPortable<T>;
  }
}

template <typename T>
void AttendRowsPortable(const float* const* q, int rows, const KeyBlocksT<T>& k,
                        const KvRowsT<T>& v, int32_t head_dim, float scale, const int32_t* first,
                        const int32_t* visible, float* const* scores, float* const* out) {
  for (int r = 0; r < rows; ++r) {
    AttendRowPortable(q[r], k, v, head_dim, scale, first[r], visible[r], scores[r], out[r]);
  }
}

template <typename T>
AttendRowsFn<T> SelectAttendRows() {
  switch (SelectedKernelPath()) {
    case CpuKernelPath::kAvx512: return &AttendRowsAvx512<T>;
    case CpuKernelPath::kAvx2: return &AttendRowsAvx2<T>;
    default: return &AttendRowsPortable<T>;
  }
}

template AttendRowFn<float> SelectAttendRow<float>();
template AttendRowFn<uint16_t> SelectAttendRow<uint16_t>();
template AttendRowFn<int8_t> SelectAttendRow<int8_t>();
template AttendRowsFn<float> SelectAttendRows<float>();
template AttendRowsFn<uint16_t> SelectAttendRows<uint16_t>();
template AttendRowsFn<int8_t> SelectAttendRows<int8_t>();
template void AttendRowPortable<float>(const float*, const KeyBlocksT<float>&,
                                       const KvRowsT<float>&, int32_t, float, int32_t, int32_t,
                                       float*, float*);
template void AttendRowPortable<uint16_t>(const float*, const KeyBlocksT<uint16_t>&,
                                          const KvRowsT<uint16_t>&, int32_t, float, int32_t,
                                          int32_t, float*, float*);
template void AttendRowPortable<int8_t>(const float*, const KeyBlocksT<int8_t>&,
                                        const KvRowsT<int8_t>&, int32_t, float, int32_t, int32_t,
                                        float*, float*);
template void AttendRowsPortable<float>(const float* const*, int, const KeyBlocksT<float>&,
                                        const KvRowsT<float>&, int32_t, float, const int32_t*,
                                        const int32_t*, float* const*, float* const*);
template void AttendRowsPortable<uint16_t>(const float* const*, int, const KeyBlocksT<uint16_t>&,
                                           const KvRowsT<uint16_t>&, int32_t, float,
                                           const int32_t*, const int32_t*, float* const*,
                                           float* const*);
template void AttendRowsPortable<int8_t>(const float* const*, int, const KeyBlocksT<int8_t>&,
                                         const KvRowsT<int8_t>&, int32_t, float, const int32_t*,
                                         const int32_t*, float* const*, float* const*);

void FloatsToHalves(const float* src, uint16_t* dst, int64_t n) {
  switch (SelectedKernelPath()) {
    case CpuKernelPath::kAvx512: return FloatsToHalvesAvx512(src, dst, n);
    case CpuKernelPath::kAvx2: return FloatsToHalvesAvx2(src, dst, n);
    default: break;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

// A head's part of a block: block_size · head_dim elements, and in the
// int8 cache the block_size f32 scales after them (KvHeadElements).
template <typename T>
KeyBlocksT<T> CpuBackend::PagedKeys(int32_t layer, const AttentionSeq& seq, int32_t g) const {
  const int64_t head = KvHeadElements(), data = int64_t{kv_shape_.block_size} * kv_shape_.head_dim;
  return KeyBlocksT<T>{static_cast<const T*>(k_cache_[layer]->data()),
                       seq.block_table,
                       kv_shape_.block_size,
                       head * kv_shape_.num_kv_heads,
                       g * head,
                       kScaledKv<T> ? data : 0};
}

template <typename T>
KvRowsT<T> CpuBackend::PagedValues(int32_t layer, const AttentionSeq& seq, int32_t g) const {
  const int64_t head = KvHeadElements(), data = int64_t{kv_shape_.block_size} * kv_shape_.head_dim;
  return KvRowsT<T>{static_cast<const T*>(v_cache_[layer]->data()),
                    seq.block_table,
                    kv_shape_.block_size,
                    head * kv_shape_.num_kv_heads,
                    kv_shape_.head_dim,
                    g * head,
                    kScaledKv<T> ? data : 0};
}

namespace {

// One unit of attention work: a sequence (index into meta.seqs) and a head.
struct HeadItem {
  int32_t seq;
  int32_t head;
};

// The (sequence, head) items in the order they are computed. Sequences
// whose first KV block is the same (a cached prefix they share) go together
// and are walked head by head, so that each head's shared blocks stay in
// cache across them; any other sequence has all its heads in a row, which
// walks its blocks in address order. The order changes no item's
// arithmetic.
std::vector<HeadItem> HeadItemsSharingPrefixes(const AttentionMetadata& meta,
                                               const std::vector<int32_t>& seqs,
                                               int32_t num_heads) {
  std::vector<int32_t> order(seqs);
  auto first_block = [&](int32_t s) {
    return meta.seqs[s].kv_len > 0 ? meta.seqs[s].block_table[0] : -1 - s;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return first_block(a) < first_block(b); });
  std::vector<HeadItem> items;
  items.reserve(order.size() * static_cast<size_t>(num_heads));
  for (size_t g0 = 0; g0 < order.size();) {
    size_t g1 = g0 + 1;
    while (g1 < order.size() && first_block(order[g1]) == first_block(order[g0])) ++g1;
    for (int32_t h = 0; h < num_heads; ++h) {
      for (size_t i = g0; i < g1; ++i) items.push_back({order[i], h});
    }
    g0 = g1;
  }
  return items;
}

}  // namespace

template <typename T>
void CpuBackend::DecodeAttention(int32_t layer, const float* q, const AttentionShape& shape,
                                 const AttentionMetadata& meta,
                                 const std::vector<int32_t>& decode_seqs, float* out) {
  const int32_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t row_stride = int64_t{shape.num_heads} * shape.head_dim;
  const std::vector<HeadItem> items =
      HeadItemsSharingPrefixes(meta, decode_seqs, shape.num_heads);
  const AttendRowFn<T> attend = SelectAttendRow<T>();
  int64_t step_kv_bytes = 0;  // all layers, K and V
  for (int32_t s : decode_seqs) step_kv_bytes += meta.seqs[s].kv_len;
  step_kv_bytes *= static_cast<int64_t>(kv_shape_.BytesPerBlock() / kv_shape_.block_size);
  const bool prefetch = UseKvItemPrefetch(step_kv_bytes);
  pool_.ParallelFor(static_cast<int64_t>(items.size()),
                    std::max<int64_t>(1, 512 / std::max(1, meta.max_kv_len)),
                    [&](int64_t begin, int64_t end) {
    std::vector<float> scores(meta.max_kv_len);
    // Items i and j read the same keys and values (a GQA group).
    auto same_kv = [&](int64_t i, int64_t j) {
      return items[i].seq == items[j].seq && items[i].head / group == items[j].head / group;
    };
    for (int64_t item = begin; item < end; ++item) {
      const AttentionSeq& seq = meta.seqs[items[item].seq];
      const int32_t head = items[item].head;
      const int64_t row = seq.q_start;
      const KeyBlocksT<T> keys = PagedKeys<T>(layer, seq, head / group);
      const KvRowsT<T> values = PagedValues<T>(layer, seq, head / group);
      const int32_t visible = VisibleKeys(seq, 0);
      if (prefetch && (item == begin || !same_kv(item, item - 1))) {
        values.PrefetchRowsL2(visible, kItemPrefetchBytes);
      }
      if (prefetch && item + 1 < end && !same_kv(item, item + 1)) {
        const AttentionSeq& next = meta.seqs[items[item + 1].seq];
        PagedKeys<T>(layer, next, items[item + 1].head / group)
            .PrefetchKeysL2(VisibleKeys(next, 0), shape.head_dim, kItemPrefetchBytes);
      }
      attend(q + row * row_stride + head * shape.head_dim, keys, values, shape.head_dim,
             shape.scale, FirstKey(seq, 0, shape.window), visible, scores.data(),
             out + row * row_stride + head * shape.head_dim);
    }
  });
}

template <typename T>
void CpuBackend::PrefillAttention(int32_t layer, const float* q, const AttentionShape& shape,
                                  const AttentionMetadata& meta,
                                  const std::vector<int32_t>& prefill_seqs, float* out) {
  int32_t t_q_max = 0, t_k_max = 0;
  for (int32_t s : prefill_seqs) {
    t_q_max = std::max(t_q_max, meta.seqs[s].q_len);
    t_k_max = std::max(t_k_max, meta.seqs[s].kv_len);
  }
  const int32_t group = shape.num_heads / shape.num_kv_heads, d = shape.head_dim;
  const int64_t row_stride = int64_t{shape.num_heads} * d;
  const AttendRowsFn<T> attend = SelectAttendRows<T>();
  // One ((sequence, head), group of kRows query rows) per item, the
  // (sequence, head) pairs in decode's order; items past a sequence's own
  // rows are skipped. The rows read K and V in place from the paged cache,
  // as decode rows do.
  constexpr int32_t kRows = kMaxAttendRows;
  const int32_t row_groups = (t_q_max + kRows - 1) / kRows;
  const std::vector<HeadItem> heads =
      HeadItemsSharingPrefixes(meta, prefill_seqs, shape.num_heads);
  const int64_t total = static_cast<int64_t>(heads.size()) * row_groups;
  pool_.ParallelFor(total, std::max<int64_t>(1, 1024 / std::max(1, t_k_max)),
                    [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(size_t(kRows) * t_k_max);
    for (int64_t item = begin; item < end; ++item) {
      const HeadItem& h = heads[item / row_groups];
      const int32_t head = h.head;
      const int32_t t0 = static_cast<int32_t>(item % row_groups) * kRows;
      const AttentionSeq& seq = meta.seqs[h.seq];
      const int rows = std::min(kRows, seq.q_len - t0);
      if (rows <= 0) continue;  // past this sequence's query rows
      const KeyBlocksT<T> k = PagedKeys<T>(layer, seq, head / group);
      const KvRowsT<T> v = PagedValues<T>(layer, seq, head / group);
      const float* q_rows[kRows];
      float* out_rows[kRows];
      float* score_rows[kRows];
      int32_t visible[kRows], first[kRows];
      for (int r = 0; r < rows; ++r) {
        const int64_t row = seq.q_start + t0 + r;
        q_rows[r] = q + row * row_stride + head * d;
        out_rows[r] = out + row * row_stride + head * d;
        score_rows[r] = scratch.data() + size_t(r) * t_k_max;
        visible[r] = VisibleKeys(seq, t0 + r);
        first[r] = FirstKey(seq, t0 + r, shape.window);
      }
      attend(q_rows, rows, k, v, d, shape.scale, first, visible, score_rows, out_rows);
    }
  });
}

template <typename T>
void CpuBackend::AttentionT(int32_t layer, const float* q, const AttentionShape& shape,
                            const AttentionMetadata& meta, float* out) {
  std::vector<int32_t> decode_seqs, prefill_seqs;
  for (int32_t s = 0; s < static_cast<int32_t>(meta.seqs.size()); ++s) {
    (meta.seqs[s].q_len == 1 ? decode_seqs : prefill_seqs).push_back(s);
  }
  if (!prefill_seqs.empty()) PrefillAttention<T>(layer, q, shape, meta, prefill_seqs, out);
  if (!decode_seqs.empty()) DecodeAttention<T>(layer, q, shape, meta, decode_seqs, out);
}

void CpuBackend::Attention(int32_t layer, const float* q, const AttentionShape& shape,
                           const AttentionMetadata& meta, float* out) {
  if (kv_shape_.dtype == DType::kF16) return AttentionT<uint16_t>(layer, q, shape, meta, out);
  if (kv_shape_.dtype == DType::kI8) return AttentionT<int8_t>(layer, q, shape, meta, out);
  AttentionT<float>(layer, q, shape, meta, out);
}

}  // namespace tessera::cpu
