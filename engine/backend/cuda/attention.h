// Attention on the GPU over the paged KV cache (layout in attention_plan.h):
// KV append through the slot mapping, paged decode attention with a fixed
// split of the keys, and the kernels around prefill's two strided-batched
// GEMMs (PrefillAttentionChunk runs the whole chunk). Launchers enqueue on
// `stream`, never allocate, and return the launch's status. Device pointers
// throughout; the CPU twins are in twins.h.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/attention_plan.h"

namespace tessera::cuda {

// Writes k, v [num_tokens, kv_heads, head_dim] (f32) to the slots
// slot_mapping[i] = block · block_size + offset.
absl::Status LaunchKvAppend(const float* k, const float* v, const int32_t* slot_mapping,
                            int32_t num_tokens, const KvLayer& cache, cudaStream_t stream);

// out[item.q_row, h, :] for every decode item and head: splits of
// kDecodeSplitKeys keys each write a partial (max, sum, unnormalised
// output) to `partials` ([num_items, heads, max_splits, head_dim + 2] f32),
// then a second kernel merges them in split order. q, out: [rows, heads, d].
absl::Status LaunchDecodeAttention(const float* q, const KvLayer& cache,
                                   const AttentionShape& shape, const int32_t* block_tables,
                                   const DecodeItem* items, int32_t num_items, int32_t max_splits,
                                   float* partials, float* out, cudaStream_t stream);

// The pieces of a prefill chunk (see attention_plan.h for the layouts).
struct ChunkBuffers {
  void* q = nullptr;  // [count, kv_heads, group·tq, d] KV dtype
  void* k = nullptr;  // [count, kv_heads, tk, d]
  void* v = nullptr;
  float* scores = nullptr;  // [count, kv_heads, group·tq, tk]
  void* probs = nullptr;    // same, KV dtype
  float* out = nullptr;     // [count, kv_heads, group·tq, d]
};
ChunkBuffers ChunkBuffersAt(void* workspace, const ChunkLayout& layout);

absl::Status LaunchPackQuery(const float* q, const PrefillItem* items, const PrefillChunk& chunk,
                             const AttentionShape& shape, DType dtype, void* q_packed,
                             cudaStream_t stream);
absl::Status LaunchGatherKv(const KvLayer& cache, const int32_t* block_tables,
                            const PrefillItem* items, const PrefillChunk& chunk, void* k_padded,
                            void* v_padded, cudaStream_t stream);
// probs = softmax(scores + causal/padding mask, and the sliding window when
// shape.window > 0) per row; padded rows become 0.
absl::Status LaunchMaskedSoftmax(const float* scores, const PrefillItem* items,
                                 const PrefillChunk& chunk, const AttentionShape& shape,
                                 DType dtype, void* probs, cudaStream_t stream);
absl::Status LaunchUnpackOutput(const float* o, const PrefillItem* items, const PrefillChunk& chunk,
                                const AttentionShape& shape, float* out, cudaStream_t stream);

// Pack Q, gather K and V, S = scale · Q·Kᵀ (strided-batched GEMM), masked
// softmax, O = P·V (strided-batched GEMM), unpack into out. `items` is the
// device copy of the plan's prefill items; chunk.first_item indexes it.
absl::Status PrefillAttentionChunk(cublasHandle_t cublas, const float* q, const KvLayer& cache,
                                   const AttentionShape& shape, const int32_t* block_tables,
                                   const PrefillItem* items, const PrefillChunk& chunk,
                                   void* workspace, float* out, cudaStream_t stream);

}  // namespace tessera::cuda
