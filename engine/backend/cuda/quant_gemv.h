// Linear layers on quantized weights kept on the device in their GGUF
// blocks (layout in quant_math.h: the file's bytes, row-major rows of
// blocks; Weight::layout kRowMajor with the quantized dtype).
//   decode (n ≤ kQuantGemvMaxRows activation rows): LaunchQuantGemv reads
//     the blocks directly, one warp per output row;
//   prefill (more rows): LaunchDequantize expands rows of blocks into a
//     16-bit (or f32) scratch matrix that the caller owns, for cuBLAS.
// Like kernels.h, each launcher enqueues work on `stream`, never allocates
// and returns the launch's status; pointers are device memory. The CPU twin
// is twin::QuantLinear (twins.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/quant_math.h"

namespace tessera::cuda {

// y[n, rows] = x[n, cols] · dequant(w)ᵀ, for 0 ≤ n ≤ kQuantGemvMaxRows:
// x and y f32 row-major, w of quantized `dtype` [rows, cols] (cols a whole
// number of blocks). Each weight is the reference value (quant/dequantize.cc)
// exactly; products are summed in f32, each lane over every 32nd column,
// then across the warp in a fixed tree: the result does not depend on n.
absl::Status LaunchQuantGemv(const float* x, int32_t n, const void* w, DType dtype, int64_t rows,
                             int64_t cols, float* y, cudaStream_t stream);

// out[r, c] = dequant(w)[r, c] rounded to nearest even to out_dtype (f32,
// f16 or bf16), row-major [rows, cols], for `rows` rows of blocks starting
// at w (a tile of a larger matrix is w advanced by whole rows).
absl::Status LaunchDequantize(const void* w, DType dtype, int64_t rows, int64_t cols,
                              DType out_dtype, void* out, cudaStream_t stream);

}  // namespace tessera::cuda
