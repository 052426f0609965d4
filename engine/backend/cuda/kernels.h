// Launchers of Tessera's own CUDA kernels (other than attention, which is in
// attention.h). Each enqueues work on `stream`, never allocates, and returns
// the launch's status. Activations are f32; tables (embeddings) are f32,
// f16 or bf16 row-major [rows, dim]; vectors (norm gains, biases) are f32.
// The CPU twin of each kernel is in twins.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/backend/backend.h"

namespace tessera::cuda {

// out[i, :] = table[ids[i], :]   (ids and out in device memory)
absl::Status LaunchEmbedding(const void* table, DType dtype, int64_t dim, const int32_t* ids,
                             int32_t n, float* out, cudaStream_t stream);
// x[i, :] += table[positions[i], :]
absl::Status LaunchAddPositionEmbedding(float* x, const void* table, DType dtype, int64_t dim,
                                        const int32_t* positions, int32_t n, cudaStream_t stream);
// out[i, :] = x[i, :] · rsqrt(mean(x[i, :]²) + eps) · w   (sums in double)
absl::Status LaunchRmsNorm(const float* x, const float* w, float eps, int32_t n, int64_t dim,
                           float* out, cudaStream_t stream);
// out[i, :] = (x[i, :] - mean) · rsqrt(var + eps) · w + b   (sums in double)
absl::Status LaunchLayerNorm(const float* x, const float* w, const float* b, float eps, int32_t n,
                             int64_t dim, float* out, cudaStream_t stream);
// Rotates adjacent pairs of the first rot_dim dims of each head in place.
// x: [n, heads, head_dim]; positions: [n].
absl::Status LaunchRope(float* x, int32_t n, int32_t heads, int32_t head_dim, int32_t rot_dim,
                        float base, const int32_t* positions, cudaStream_t stream);
// RoPE of any style, frequency scale and factors (RopeSpec, backend.h);
// spec.freq_factors, when set, is in device memory.
absl::Status LaunchRopeExt(float* x, int32_t n, int32_t heads, int32_t head_dim,
                           const RopeSpec& spec, const int32_t* positions, cudaStream_t stream);
// out[i] = gelu_tanh(gate[i]) · up[i]   (out may alias gate)
absl::Status LaunchGeGlu(const float* gate, const float* up, int64_t count, float* out,
                         cudaStream_t stream);
// x[i] *= s
absl::Status LaunchScale(float* x, int64_t count, float s, cudaStream_t stream);
// x[i] = cap · tanh(x[i] / cap)
absl::Status LaunchSoftcap(float* x, int64_t count, float cap, cudaStream_t stream);
// out[i] = silu(gate[i]) · up[i]   (out may alias gate)
absl::Status LaunchSwiGlu(const float* gate, const float* up, int64_t count, float* out,
                          cudaStream_t stream);
// x[i] = gelu_tanh(x[i])
absl::Status LaunchGelu(float* x, int64_t count, cudaStream_t stream);
// x[i] += y[i]
absl::Status LaunchAdd(float* x, const float* y, int64_t count, cudaStream_t stream);
// y[i, :] += bias   (y: [n, cols])
absl::Status LaunchAddBias(float* y, const float* bias, int32_t n, int64_t cols,
                           cudaStream_t stream);
// dst[i, :] = src[rows[i], :]   (rows in device memory)
absl::Status LaunchGatherRows(const float* src, int64_t cols, const int32_t* rows, int32_t n,
                              float* dst, cudaStream_t stream);
// out[i] = dtype(x[i]), rounding to nearest even: activations into a
// weight's type before a GEMM. dtype f16 or bf16.
absl::Status LaunchConvert(const float* x, int64_t count, DType dtype, void* out,
                           cudaStream_t stream);

}  // namespace tessera::cuda
