// CPU twins of the CUDA kernels: the same layouts, the same per-element math
// (math.h) and the same roundings (activations to the weight type before a
// GEMM; Q and probabilities to the KV type in prefill attention), written
// plainly. GPU parity tests compare each kernel with its twin; CPU tests
// compare the twins with the CPU backend, so the twins are checked here.
// All pointers are host memory. 16-bit data is raw IEEE half or bf16 bits.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/attention_plan.h"
#include "engine/backend/cuda/sampling_params.h"

namespace tessera::cuda::twin {

float Load(const void* data, DType dtype, int64_t i);
void Store(void* data, DType dtype, int64_t i, float x);  // rounds to nearest even
// x rounded to dtype and back.
float Round(float x, DType dtype);

void Embedding(const void* table, DType dtype, int64_t dim, const int32_t* ids, int32_t n,
               float* out);
void AddPositionEmbedding(float* x, const void* table, DType dtype, int64_t dim,
                          const int32_t* positions, int32_t n);
void RmsNorm(const float* x, const float* w, float eps, int32_t n, int64_t dim, float* out);
void LayerNorm(const float* x, const float* w, const float* b, float eps, int32_t n, int64_t dim,
               float* out);
void Rope(float* x, int32_t n, int32_t heads, int32_t head_dim, int32_t rot_dim, float base,
          const int32_t* positions);
// spec.freq_factors in host memory.
void RopeExt(float* x, int32_t n, int32_t heads, int32_t head_dim, const RopeSpec& spec,
             const int32_t* positions);
void SwiGlu(const float* gate, const float* up, int64_t count, float* out);
void GeGlu(const float* gate, const float* up, int64_t count, float* out);
void Scale(float* x, int64_t count, float s);
void Softcap(float* x, int64_t count, float cap);
void Gelu(float* x, int64_t count);
void Add(float* x, const float* y, int64_t count);
void AddBias(float* y, const float* bias, int32_t n, int64_t cols);
void GatherRows(const float* src, int64_t cols, const int32_t* rows, int32_t n, float* dst);
// y[n, rows] = round(x, w_dtype)[n, cols] · wᵀ, w row-major [rows, cols]
// of w_dtype, accumulated in double (cuBLAS accumulates in f32).
void Linear(const float* x, int32_t n, const void* w, DType w_dtype, int64_t rows, int64_t cols,
            float* y);
// y[n, rows] = x[n, cols] · dequant(w)ᵀ, w of quantized `dtype` as the file
// stores it (row-major rows of blocks, quant_gemv.h), each row expanded by
// quant::DequantizeRow; x is not rounded (the GEMV reads f32 activations)
// and the products are summed in double (the GEMV sums in f32).
void QuantLinear(const float* x, int32_t n, const void* w_blocks, DType dtype, int64_t rows,
                 int64_t cols, float* y);

void KvAppend(const float* k, const float* v, const int32_t* slot_mapping, int32_t num_tokens,
              const KvLayer& cache);
// Decode rows of `plan`, with the same fixed key splits as the GPU.
void DecodeAttention(const float* q, const KvLayer& cache, const AttentionShape& shape,
                     const AttentionPlan& plan, float* out);
// Prefill rows of `plan`: Q and the probabilities rounded to the KV type,
// as the GPU's padded GEMMs see them.
void PrefillAttention(const float* q, const KvLayer& cache, const AttentionShape& shape,
                      const AttentionPlan& plan, float* out);

// The sampling kernel's token for one row (sampling_params.h), with its
// chunked sums in the same order.
int32_t Sample(const float* logits, int32_t vocab, const DeviceSamplingParams& params);

}  // namespace tessera::cuda::twin
