#include <string>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/device.h"
#include "engine/backend/cuda/device_util.cuh"
#include "engine/backend/cuda/quant_gemv.h"

namespace tessera::cuda {
namespace {

using quant::QuantType;

// Warps (output rows) per thread block of the GEMV.
constexpr int kGemvWarps = 4;
constexpr int kDequantThreads = 256;

// Calls f.template operator()<T>() with T the block type of `type`.
template <typename F>
void DispatchQuant(QuantType type, F&& f) {
  switch (type) {
    case QuantType::kQ4_0: return f.template operator()<QuantType::kQ4_0>();
    case QuantType::kQ4_1: return f.template operator()<QuantType::kQ4_1>();
    case QuantType::kQ5_0: return f.template operator()<QuantType::kQ5_0>();
    case QuantType::kQ5_1: return f.template operator()<QuantType::kQ5_1>();
    case QuantType::kQ8_0: return f.template operator()<QuantType::kQ8_0>();
    case QuantType::kQ4_K: return f.template operator()<QuantType::kQ4_K>();
    case QuantType::kQ5_K: return f.template operator()<QuantType::kQ5_K>();
    case QuantType::kQ6_K: return f.template operator()<QuantType::kQ6_K>();
    case QuantType::kQ2_K: return f.template operator()<QuantType::kQ2_K>();
    case QuantType::kQ3_K: return f.template operator()<QuantType::kQ3_K>();
    case QuantType::kIQ4_NL: return f.template operator()<QuantType::kIQ4_NL>();
    case QuantType::kIQ4_XS: return f.template operator()<QuantType::kIQ4_XS>();
  }
}

// Warp w of block b owns output row b · kGemvWarps + w: its lanes walk the
// row's blocks (GemvLane, quant_math.h) and the warp sums their partials.
// The branch on i < n is uniform across the warp, as WarpSum requires.
template <QuantType T>
__global__ void __launch_bounds__(kGemvWarps * 32)
    QuantGemvKernel(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t cols,
                    const float* x, int32_t n, float* y) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  float acc[kQuantGemvMaxRows];
#pragma unroll
  for (int i = 0; i < kQuantGemvMaxRows; ++i) acc[i] = 0.0f;
  GemvLane<T>(w + row * row_bytes, cols, x, n, lane, acc);
#pragma unroll
  for (int i = 0; i < kQuantGemvMaxRows; ++i) {
    if (i < n) {
      const float sum = WarpSum(acc[i]);
      if (lane == 0) y[int64_t(i) * rows + row] = sum;
    }
  }
}

// One thread per output element, grid-stride; consecutive threads write
// consecutive elements of a row.
template <QuantType T, typename O>
__global__ void DequantizeKernel(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t cols,
                                 O* out) {
  const int64_t count = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    out[i] = FromF32<O>(DequantAt<T>(w + r * row_bytes, c));
  }
}

absl::Status CheckQuantized(DType dtype, int64_t rows, int64_t cols, const char* what) {
  if (!IsQuantized(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the weight is not quantized"));
  }
  const quant::QuantInfo& info = quant::Info(QuantTypeOf(dtype));
  if (rows < 0 || cols <= 0 || cols % info.block_elems != 0) {
    // (nvcc cannot instantiate StrCat with more than five arguments)
    const std::string shape = absl::StrCat(rows, "x", cols, " of ", std::string(info.name));
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", shape, " is not whole blocks of ", info.block_elems));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LaunchQuantGemv(const float* x, int32_t n, const void* w, DType dtype, int64_t rows,
                             int64_t cols, float* y, cudaStream_t stream) {
  if (auto s = CheckQuantized(dtype, rows, cols, "quantized GEMV"); !s.ok()) return s;
  if (n > kQuantGemvMaxRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantized GEMV takes at most ", kQuantGemvMaxRows, " rows, not ", n));
  }
  if (n <= 0 || rows == 0) return absl::OkStatus();
  const int64_t row_bytes = quant::RowBytes(QuantTypeOf(dtype), cols);
  const unsigned grid = static_cast<unsigned>((rows + kGemvWarps - 1) / kGemvWarps);
  DispatchQuant(QuantTypeOf(dtype), [&]<QuantType T>() {
    QuantGemvKernel<T><<<grid, kGemvWarps * 32, 0, stream>>>(
        static_cast<const uint8_t*>(w), row_bytes, rows, cols, x, n, y);
  });
  return LaunchStatus("QuantGemvKernel");
}

absl::Status LaunchDequantize(const void* w, DType dtype, int64_t rows, int64_t cols,
                              DType out_dtype, void* out, cudaStream_t stream) {
  if (auto s = CheckQuantized(dtype, rows, cols, "dequantize"); !s.ok()) return s;
  if (IsQuantized(out_dtype)) {
    return absl::InvalidArgumentError("dequantize: the output must be f32, f16 or bf16");
  }
  if (rows == 0) return absl::OkStatus();
  const int64_t row_bytes = quant::RowBytes(QuantTypeOf(dtype), cols);
  const unsigned grid = GridFor(rows * cols, kDequantThreads);
  DispatchQuant(QuantTypeOf(dtype), [&]<QuantType T>() {
    DispatchDType(out_dtype, [&]<typename O>() {
      DequantizeKernel<T, O><<<grid, kDequantThreads, 0, stream>>>(
          static_cast<const uint8_t*>(w), row_bytes, rows, cols, static_cast<O*>(out));
    });
  });
  return LaunchStatus("DequantizeKernel");
}

}  // namespace tessera::cuda
