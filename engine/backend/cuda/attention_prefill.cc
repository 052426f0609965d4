// A prefill chunk: the padded batch of attention_plan.h through two
// strided-batched GEMMs, one batch item per (item, KV head). Grouped-query
// heads need no copies of K and V: the `group` query heads that share a KV
// head are stacked as group·tq rows of one GEMM operand.
#include "engine/backend/cuda/attention.h"
#include "engine/backend/cuda/gemm.h"

namespace tessera::cuda {

ChunkBuffers ChunkBuffersAt(void* workspace, const ChunkLayout& layout) {
  auto* base = static_cast<char*>(workspace);
  return ChunkBuffers{base + layout.q,     base + layout.k,
                      base + layout.v,     reinterpret_cast<float*>(base + layout.scores),
                      base + layout.probs, reinterpret_cast<float*>(base + layout.out)};
}

absl::Status PrefillAttentionChunk(cublasHandle_t cublas, const float* q, const KvLayer& cache,
                                   const AttentionShape& shape, const int32_t* block_tables,
                                   const PrefillItem* items, const PrefillChunk& chunk,
                                   void* workspace, float* out, cudaStream_t stream) {
  // The GEMMs queue on the handle's stream: bind it to the kernels' stream,
  // or they could read Q, K and V before the kernels write them.
  if (cublasSetStream(cublas, stream) != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError("cublasSetStream failed");
  }
  const size_t elem = cache.dtype == DType::kF32 ? 4 : 2;
  const ChunkBuffers b =
      ChunkBuffersAt(workspace, LayoutChunk(chunk.count, chunk.tq, chunk.tk, shape, elem));
  const int64_t d = shape.head_dim, tk = chunk.tk;
  const int64_t rows = int64_t(shape.num_heads / shape.num_kv_heads) * chunk.tq;  // group·tq
  const int64_t batch = int64_t(chunk.count) * shape.num_kv_heads;
  if (auto s = LaunchPackQuery(q, items, chunk, shape, cache.dtype, b.q, stream); !s.ok()) return s;
  if (auto s = LaunchGatherKv(cache, block_tables, items, chunk, b.k, b.v, stream); !s.ok()) {
    return s;
  }
  // S[u] [rows, tk] = scale · Q[u] [rows, d] · K[u]ᵀ, K[u] stored [tk, d].
  GemmOperands qk;
  qk.shape = RowMajorGemm{rows, tk, d, /*b_transposed=*/true, d, d, tk};
  qk.ab_dtype = cache.dtype;
  qk.a = b.q, qk.b = b.k, qk.c = b.scores, qk.alpha = shape.scale;
  qk.batch = batch, qk.stride_a = rows * d, qk.stride_b = tk * d, qk.stride_c = rows * tk;
  if (auto s = GemmRowMajor(cublas, qk); !s.ok()) return s;
  if (auto s = LaunchMaskedSoftmax(b.scores, items, chunk, shape, cache.dtype, b.probs, stream);
      !s.ok()) {
    return s;
  }
  // O[u] [rows, d] = P[u] [rows, tk] · V[u] [tk, d].
  GemmOperands pv;
  pv.shape = RowMajorGemm{rows, d, tk, /*b_transposed=*/false, tk, d, d};
  pv.ab_dtype = cache.dtype;
  pv.a = b.probs, pv.b = b.v, pv.c = b.out;
  pv.batch = batch, pv.stride_a = rows * tk, pv.stride_b = tk * d, pv.stride_c = rows * d;
  if (auto s = GemmRowMajor(cublas, pv); !s.ok()) return s;
  return LaunchUnpackOutput(b.out, items, chunk, shape, out, stream);
}

}  // namespace tessera::cuda
