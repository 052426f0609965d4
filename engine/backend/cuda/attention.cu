#include "engine/backend/cuda/attention.h"
#include "engine/backend/cuda/device.h"
#include "engine/backend/cuda/device_util.cuh"
#include "engine/backend/cuda/math.h"

namespace tessera::cuda {
namespace {

// Element (block, head g, offset o, dim 0) of a paged layer.
__device__ __forceinline__ int64_t KvIndex(int32_t block, int32_t g, int32_t o, int32_t kv_heads,
                                           int32_t block_size, int32_t head_dim) {
  return ((static_cast<int64_t>(block) * kv_heads + g) * block_size + o) * head_dim;
}

// One block per token; threads over kv_heads · head_dim.
template <typename T>
__global__ void KvAppendKernel(const float* k, const float* v, const int32_t* slots, T* kc, T* vc,
                               int32_t block_size, int32_t kv_heads, int32_t head_dim) {
  const int32_t slot = slots[blockIdx.x];
  const int32_t block = slot / block_size, o = slot % block_size;
  const int32_t row = kv_heads * head_dim;
  for (int32_t e = threadIdx.x; e < row; e += blockDim.x) {
    const int64_t at =
        KvIndex(block, e / head_dim, o, kv_heads, block_size, head_dim) + e % head_dim;
    kc[at] = FromF32<T>(k[static_cast<int64_t>(blockIdx.x) * row + e]);
    vc[at] = FromF32<T>(v[static_cast<int64_t>(blockIdx.x) * row + e]);
  }
}

constexpr int kDecodeThreads = 128;

// Grid (item, head, split). Scores of the split's keys (one warp per key,
// lanes over dims), their softmax partial, then the weighted sum of values
// (threads over dims). Empty splits write max −inf and sum 0.
template <typename T>
__global__ void DecodeSplitKernel(const float* q, const T* kc, const T* vc, int32_t block_size,
                                  int32_t kv_heads, int32_t heads, int32_t head_dim, float scale,
                                  int32_t window, const int32_t* tables, const DecodeItem* items,
                                  int32_t max_splits, float* partials) {
  __shared__ float q_s[256];
  __shared__ float p_s[kDecodeSplitKeys];
  const DecodeItem item = items[blockIdx.x];
  const int32_t h = blockIdx.y, g = h / (heads / kv_heads);
  const int32_t begin = blockIdx.z * kDecodeSplitKeys;
  const int32_t end = min(item.kv_len, begin + kDecodeSplitKeys);
  // Keys before the sliding window's first are masked; a split entirely
  // before it is empty.
  const int32_t lo = max(begin, FirstVisibleKey(item.kv_len - 1, window));
  float* part =
      partials + ((int64_t(blockIdx.x) * heads + h) * max_splits + blockIdx.z) * (head_dim + 2);
  for (int32_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    q_s[i] = q[(int64_t(item.q_row) * heads + h) * head_dim + i];
  }
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int32_t j = lo + warp; j < end; j += warps) {
    const int32_t block = tables[item.table_offset + j / block_size];
    const T* key = kc + KvIndex(block, g, j % block_size, kv_heads, block_size, head_dim);
    float dot = 0.0f;
    for (int32_t i = lane; i < head_dim; i += 32) dot += q_s[i] * ToF32(key[i]);
    dot = WarpSum(dot);
    if (lane == 0) p_s[j - begin] = dot * scale;
  }
  __syncthreads();
  float m = -INFINITY;
  for (int32_t j = lo + threadIdx.x; j < end; j += blockDim.x) m = fmaxf(m, p_s[j - begin]);
  m = BlockMax(m);
  float l = 0.0f;
  for (int32_t j = lo + threadIdx.x; j < end; j += blockDim.x) {
    const float p = m == -INFINITY ? 0.0f : expf(p_s[j - begin] - m);
    p_s[j - begin] = p;
    l += p;
  }
  l = BlockSum(l);  // also orders the writes to p_s before the reads below
  for (int32_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float acc = 0.0f;
    for (int32_t j = lo; j < end; ++j) {
      const int32_t block = tables[item.table_offset + j / block_size];
      acc += p_s[j - begin] *
             ToF32(vc[KvIndex(block, g, j % block_size, kv_heads, block_size, head_dim) + i]);
    }
    part[2 + i] = acc;
  }
  if (threadIdx.x == 0) part[0] = m, part[1] = l;
}

// Grid (item, head); threads over dims. Merges the splits in order.
__global__ void DecodeCombineKernel(const DecodeItem* items, int32_t heads, int32_t head_dim,
                                    int32_t max_splits, const float* partials, float* out) {
  const DecodeItem item = items[blockIdx.x];
  const int32_t h = blockIdx.y, splits = NumDecodeSplits(item.kv_len);
  const float* part = partials + (int64_t(blockIdx.x) * heads + h) * max_splits * (head_dim + 2);
  float m = -INFINITY;
  for (int32_t s = 0; s < splits; ++s) m = fmaxf(m, part[s * (head_dim + 2)]);
  float l = 0.0f;
  for (int32_t s = 0; s < splits; ++s) {
    l += part[s * (head_dim + 2) + 1] * SplitWeight(part[s * (head_dim + 2)], m);
  }
  for (int32_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float acc = 0.0f;
    for (int32_t s = 0; s < splits; ++s) {
      acc += part[s * (head_dim + 2) + 2 + i] * SplitWeight(part[s * (head_dim + 2)], m);
    }
    out[(int64_t(item.q_row) * heads + h) * head_dim + i] = l > 0.0f ? acc / l : 0.0f;
  }
}

// Rows (queries or keys) per block of the layout kernels: grid.z tiles them,
// so even one long prompt spreads over many blocks.
constexpr int32_t kTileRows = 32;

// Grid (item, head, row tile); Q row t of head h = g·group + r goes to
// q_packed[item, g, r·tq + t, :] = q_packed[(item·heads + h)·tq + t, :];
// rows past the item's are zero.
template <typename T>
__global__ void PackQueryKernel(const float* q, const PrefillItem* items, int32_t tq, int32_t heads,
                                int32_t head_dim, T* q_packed) {
  const PrefillItem item = items[blockIdx.x];
  const int32_t h = blockIdx.y, t0 = blockIdx.z * kTileRows;
  T* dst = q_packed + ((int64_t(blockIdx.x) * heads + h) * tq) * head_dim;
  for (int32_t e = threadIdx.x; e < kTileRows * head_dim; e += blockDim.x) {
    const int32_t t = t0 + e / head_dim, i = e % head_dim;
    if (t >= tq) break;
    const float x = t < item.rows ? q[(int64_t(item.q_row + t) * heads + h) * head_dim + i] : 0.0f;
    dst[int64_t(t) * head_dim + i] = FromF32<T>(x);
  }
}

// Grid (item, kv head, key tile); keys past the item's last visible one are
// zero.
template <typename T>
__global__ void GatherKvKernel(const T* kc, const T* vc, int32_t block_size, int32_t kv_heads,
                               int32_t head_dim, const int32_t* tables, const PrefillItem* items,
                               int32_t tk, T* kp, T* vp) {
  const PrefillItem item = items[blockIdx.x];
  const int32_t g = blockIdx.y, keys = item.KeysNeeded(), j0 = blockIdx.z * kTileRows;
  const int64_t base = (int64_t(blockIdx.x) * kv_heads + g) * tk * head_dim;
  for (int32_t e = threadIdx.x; e < kTileRows * head_dim; e += blockDim.x) {
    const int32_t j = j0 + e / head_dim, i = e % head_dim;
    if (j >= tk) break;
    T kx = FromF32<T>(0.0f), vx = FromF32<T>(0.0f);
    if (j < keys) {
      const int32_t block = tables[item.table_offset + j / block_size];
      const int64_t at = KvIndex(block, g, j % block_size, kv_heads, block_size, head_dim) + i;
      kx = kc[at], vx = vc[at];
    }
    kp[base + int64_t(j) * head_dim + i] = kx, vp[base + int64_t(j) * head_dim + i] = vx;
  }
}

// One block per score row (item, head, t).
template <typename T>
__global__ void MaskedSoftmaxKernel(const float* scores, const PrefillItem* items, int32_t tq,
                                    int32_t tk, int32_t heads, int32_t window, T* probs) {
  const int64_t row = blockIdx.x;
  const int32_t t = static_cast<int32_t>(row % tq);
  const PrefillItem item = items[row / (int64_t(heads) * tq)];
  const int32_t visible = t < item.rows ? item.first_pos + t + 1 : 0;
  const int32_t first = t < item.rows ? FirstVisibleKey(item.first_pos + t, window) : 0;
  const float* s = scores + row * tk;
  T* p = probs + row * tk;
  float m = -INFINITY;
  for (int32_t j = first + threadIdx.x; j < visible; j += blockDim.x) m = fmaxf(m, s[j]);
  m = BlockMax(m);
  double sum = 0.0;
  for (int32_t j = first + threadIdx.x; j < visible; j += blockDim.x) sum += expf(s[j] - m);
  sum = BlockSum(sum);
  const float inv = visible > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (int32_t j = threadIdx.x; j < tk; j += blockDim.x) {
    p[j] = FromF32<T>(j >= first && j < visible ? expf(s[j] - m) * inv : 0.0f);
  }
}

// Grid (item, head, row tile): out[q_row + t, h, :] = o[item, h, t, :] for
// real rows.
__global__ void UnpackOutputKernel(const float* o, const PrefillItem* items, int32_t tq,
                                   int32_t heads, int32_t head_dim, float* out) {
  const PrefillItem item = items[blockIdx.x];
  const int32_t h = blockIdx.y, t0 = blockIdx.z * kTileRows;
  const float* src = o + ((int64_t(blockIdx.x) * heads + h) * tq) * head_dim;
  for (int32_t e = threadIdx.x; e < kTileRows * head_dim; e += blockDim.x) {
    const int32_t t = t0 + e / head_dim, i = e % head_dim;
    if (t >= item.rows) break;
    out[(int64_t(item.q_row + t) * heads + h) * head_dim + i] = src[int64_t(t) * head_dim + i];
  }
}

unsigned Tiles(int32_t rows) { return static_cast<unsigned>((rows + kTileRows - 1) / kTileRows); }

}  // namespace

absl::Status LaunchKvAppend(const float* k, const float* v, const int32_t* slot_mapping,
                            int32_t num_tokens, const KvLayer& c, cudaStream_t stream) {
  if (num_tokens <= 0) return absl::OkStatus();
  DispatchDType(c.dtype, [&]<typename T>() {
    KvAppendKernel<T><<<num_tokens, 128, 0, stream>>>(k, v, slot_mapping, static_cast<T*>(c.k),
                                                      static_cast<T*>(c.v), c.block_size,
                                                      c.kv_heads, c.head_dim);
  });
  return LaunchStatus("KvAppendKernel");
}

absl::Status LaunchDecodeAttention(const float* q, const KvLayer& c, const AttentionShape& shape,
                                   const int32_t* block_tables, const DecodeItem* items,
                                   int32_t num_items, int32_t max_splits, float* partials,
                                   float* out, cudaStream_t stream) {
  if (num_items <= 0) return absl::OkStatus();
  if (shape.head_dim > 256) return absl::InvalidArgumentError("head_dim above 256");
  const dim3 split_grid(num_items, shape.num_heads, max_splits);
  DispatchDType(c.dtype, [&]<typename T>() {
    DecodeSplitKernel<T><<<split_grid, kDecodeThreads, 0, stream>>>(
        q, static_cast<const T*>(c.k), static_cast<const T*>(c.v), c.block_size, c.kv_heads,
        shape.num_heads, shape.head_dim, shape.scale, shape.window, block_tables, items, max_splits,
        partials);
  });
  if (auto s = LaunchStatus("DecodeSplitKernel"); !s.ok()) return s;
  DecodeCombineKernel<<<dim3(num_items, shape.num_heads), 128, 0, stream>>>(
      items, shape.num_heads, shape.head_dim, max_splits, partials, out);
  return LaunchStatus("DecodeCombineKernel");
}

absl::Status LaunchPackQuery(const float* q, const PrefillItem* items, const PrefillChunk& chunk,
                             const AttentionShape& shape, DType dtype, void* q_packed,
                             cudaStream_t stream) {
  DispatchDType(dtype, [&]<typename T>() {
    PackQueryKernel<T><<<dim3(chunk.count, shape.num_heads, Tiles(chunk.tq)), 256, 0, stream>>>(
        q, items + chunk.first_item, chunk.tq, shape.num_heads, shape.head_dim,
        static_cast<T*>(q_packed));
  });
  return LaunchStatus("PackQueryKernel");
}

absl::Status LaunchGatherKv(const KvLayer& c, const int32_t* block_tables, const PrefillItem* items,
                            const PrefillChunk& chunk, void* k_padded, void* v_padded,
                            cudaStream_t stream) {
  DispatchDType(c.dtype, [&]<typename T>() {
    GatherKvKernel<T><<<dim3(chunk.count, c.kv_heads, Tiles(chunk.tk)), 256, 0, stream>>>(
        static_cast<const T*>(c.k), static_cast<const T*>(c.v), c.block_size, c.kv_heads,
        c.head_dim, block_tables, items + chunk.first_item, chunk.tk, static_cast<T*>(k_padded),
        static_cast<T*>(v_padded));
  });
  return LaunchStatus("GatherKvKernel");
}

absl::Status LaunchMaskedSoftmax(const float* scores, const PrefillItem* items,
                                 const PrefillChunk& chunk, const AttentionShape& shape,
                                 DType dtype, void* probs, cudaStream_t stream) {
  const int64_t rows = int64_t(chunk.count) * shape.num_heads * chunk.tq;
  DispatchDType(dtype, [&]<typename T>() {
    MaskedSoftmaxKernel<T><<<static_cast<unsigned>(rows), 128, 0, stream>>>(
        scores, items + chunk.first_item, chunk.tq, chunk.tk, shape.num_heads, shape.window,
        static_cast<T*>(probs));
  });
  return LaunchStatus("MaskedSoftmaxKernel");
}

absl::Status LaunchUnpackOutput(const float* o, const PrefillItem* items, const PrefillChunk& chunk,
                                const AttentionShape& shape, float* out, cudaStream_t stream) {
  UnpackOutputKernel<<<dim3(chunk.count, shape.num_heads, Tiles(chunk.tq)), 256, 0, stream>>>(
      o, items + chunk.first_item, chunk.tq, shape.num_heads, shape.head_dim, out);
  return LaunchStatus("UnpackOutputKernel");
}

}  // namespace tessera::cuda
