#include "engine/backend/cuda/device.h"
#include "engine/backend/cuda/device_util.cuh"
#include "engine/backend/cuda/kernels.h"
#include "engine/backend/cuda/math.h"

namespace tessera::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void EmbeddingKernel(const T* table, int64_t dim, const int32_t* ids, float* out) {
  const T* row = table + static_cast<int64_t>(ids[blockIdx.x]) * dim;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) out[blockIdx.x * dim + c] = ToF32(row[c]);
}

template <typename T>
__global__ void AddPositionKernel(float* x, const T* table, int64_t dim, const int32_t* pos) {
  const T* row = table + static_cast<int64_t>(pos[blockIdx.x]) * dim;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) x[blockIdx.x * dim + c] += ToF32(row[c]);
}

// One block per row.
__global__ void RmsNormKernel(const float* x, const float* w, float eps, int64_t dim, float* out) {
  const float* xi = x + blockIdx.x * dim;
  double sum = 0.0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) sum += double(xi[c]) * xi[c];
  sum = BlockSum(sum);
  const float inv = static_cast<float>(1.0 / sqrt(sum / dim + eps));
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
    out[blockIdx.x * dim + c] = xi[c] * inv * w[c];
}

__global__ void LayerNormKernel(const float* x, const float* w, const float* b, float eps,
                                int64_t dim, float* out) {
  const float* xi = x + blockIdx.x * dim;
  double sum = 0.0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) sum += xi[c];
  const double mean = BlockSum(sum) / dim;
  double var = 0.0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) var += (xi[c] - mean) * (xi[c] - mean);
  const float inv = static_cast<float>(1.0 / sqrt(BlockSum(var) / dim + eps));
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    out[blockIdx.x * dim + c] = static_cast<float>(xi[c] - mean) * inv * w[c] + b[c];
  }
}

// One block per token; threads over (pair, head). Pair p is (2p, 2p + 1)
// (adjacent) or (p, p + rot_dim / 2) (NEOX).
__global__ void RopeKernel(float* x, int32_t heads, int32_t head_dim, int32_t rot_dim, float base,
                           float freq_scale, const float* factors, float mscale, bool neox,
                           const int32_t* positions) {
  const int32_t pairs = rot_dim / 2;
  const int32_t pos = positions[blockIdx.x];
  for (int32_t item = threadIdx.x; item < pairs * heads; item += blockDim.x) {
    const int32_t p = item % pairs, h = item / pairs;
    float cs, sn;
    RopeCosSinExt(pos, p, rot_dim, base, freq_scale, factors ? factors[p] : 1.0f, &cs, &sn,
                  mscale);
    float* head = x + (static_cast<int64_t>(blockIdx.x) * heads + h) * head_dim;
    RopeRotateAt(head + (neox ? p : 2 * p), neox ? pairs : 1, cs, sn);
  }
}

__global__ void GeGluKernel(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = GeGluOf(gate[i], up[i]);
  }
}

__global__ void ScaleKernel(float* x, int64_t count, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] *= s;
  }
}

__global__ void SoftcapKernel(float* x, int64_t count, float cap, float inv_cap) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = SoftcapOf(x[i], cap, inv_cap);
  }
}

__global__ void SwiGluKernel(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = SwiGluOf(gate[i], up[i]);
  }
}

__global__ void GeluKernel(float* x, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = GeluTanhOf(x[i]);
  }
}

__global__ void AddKernel(float* x, const float* y, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

__global__ void AddBiasKernel(float* y, const float* bias, int64_t cols) {
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] += bias[c];
}

__global__ void GatherRowsKernel(const float* src, int64_t cols, const int32_t* rows, float* dst) {
  const float* row = src + static_cast<int64_t>(rows[blockIdx.x]) * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[blockIdx.x * cols + c] = row[c];
}

template <typename T>
__global__ void ConvertKernel(const float* x, int64_t count, T* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = FromF32<T>(x[i]);
  }
}

}  // namespace

absl::Status LaunchEmbedding(const void* table, DType dtype, int64_t dim, const int32_t* ids,
                             int32_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  DispatchDType(dtype, [&]<typename T>() {
    EmbeddingKernel<T><<<n, kThreads, 0, stream>>>(static_cast<const T*>(table), dim, ids, out);
  });
  return LaunchStatus("EmbeddingKernel");
}

absl::Status LaunchAddPositionEmbedding(float* x, const void* table, DType dtype, int64_t dim,
                                        const int32_t* positions, int32_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  DispatchDType(dtype, [&]<typename T>() {
    AddPositionKernel<T>
        <<<n, kThreads, 0, stream>>>(x, static_cast<const T*>(table), dim, positions);
  });
  return LaunchStatus("AddPositionKernel");
}

absl::Status LaunchRmsNorm(const float* x, const float* w, float eps, int32_t n, int64_t dim,
                           float* out, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  RmsNormKernel<<<n, kThreads, 0, stream>>>(x, w, eps, dim, out);
  return LaunchStatus("RmsNormKernel");
}

absl::Status LaunchLayerNorm(const float* x, const float* w, const float* b, float eps, int32_t n,
                             int64_t dim, float* out, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  LayerNormKernel<<<n, kThreads, 0, stream>>>(x, w, b, eps, dim, out);
  return LaunchStatus("LayerNormKernel");
}

absl::Status LaunchRope(float* x, int32_t n, int32_t heads, int32_t head_dim, int32_t rot_dim,
                        float base, const int32_t* positions, cudaStream_t stream) {
  return LaunchRopeExt(x, n, heads, head_dim, RopeSpec{rot_dim, base}, positions, stream);
}

absl::Status LaunchRopeExt(float* x, int32_t n, int32_t heads, int32_t head_dim,
                           const RopeSpec& spec, const int32_t* positions, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  if (spec.rot_dim % 2 != 0 || spec.rot_dim > head_dim) {
    return absl::InvalidArgumentError("RoPE: rot_dim must be even and at most head_dim");
  }
  RopeKernel<<<n, 128, 0, stream>>>(x, heads, head_dim, spec.rot_dim, spec.base, spec.freq_scale,
                                    spec.freq_factors, spec.mscale,
                                    spec.style == RopeStyle::kNeox, positions);
  return LaunchStatus("RopeKernel");
}

absl::Status LaunchGeGlu(const float* gate, const float* up, int64_t count, float* out,
                         cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  GeGluKernel<<<GridFor(count, kThreads), kThreads, 0, stream>>>(gate, up, count, out);
  return LaunchStatus("GeGluKernel");
}

absl::Status LaunchScale(float* x, int64_t count, float s, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  ScaleKernel<<<GridFor(count, kThreads), kThreads, 0, stream>>>(x, count, s);
  return LaunchStatus("ScaleKernel");
}

absl::Status LaunchSoftcap(float* x, int64_t count, float cap, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  SoftcapKernel<<<GridFor(count, kThreads), kThreads, 0, stream>>>(x, count, cap, 1.0f / cap);
  return LaunchStatus("SoftcapKernel");
}

absl::Status LaunchSwiGlu(const float* gate, const float* up, int64_t count, float* out,
                          cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  SwiGluKernel<<<GridFor(count, kThreads), kThreads, 0, stream>>>(gate, up, count, out);
  return LaunchStatus("SwiGluKernel");
}

absl::Status LaunchGelu(float* x, int64_t count, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  GeluKernel<<<GridFor(count, kThreads), kThreads, 0, stream>>>(x, count);
  return LaunchStatus("GeluKernel");
}

absl::Status LaunchAdd(float* x, const float* y, int64_t count, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  AddKernel<<<GridFor(count, kThreads), kThreads, 0, stream>>>(x, y, count);
  return LaunchStatus("AddKernel");
}

absl::Status LaunchAddBias(float* y, const float* bias, int32_t n, int64_t cols,
                           cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  AddBiasKernel<<<n, kThreads, 0, stream>>>(y, bias, cols);
  return LaunchStatus("AddBiasKernel");
}

absl::Status LaunchGatherRows(const float* src, int64_t cols, const int32_t* rows, int32_t n,
                              float* dst, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  GatherRowsKernel<<<n, kThreads, 0, stream>>>(src, cols, rows, dst);
  return LaunchStatus("GatherRowsKernel");
}

absl::Status LaunchConvert(const float* x, int64_t count, DType dtype, void* out,
                           cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  DispatchDType(dtype, [&]<typename T>() {
    ConvertKernel<T>
        <<<GridFor(count, kThreads), kThreads, 0, stream>>>(x, count, static_cast<T*>(out));
  });
  return LaunchStatus("ConvertKernel");
}

}  // namespace tessera::cuda
