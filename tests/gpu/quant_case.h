// Quantized test weights and a CPU emulation of the CUDA quantized GEMV,
// shared by the CPU test of the twins (tests/cuda_twins_test.cc) and the
// GPU test (tests/gpu/quant_gemv_test.cc). Pure C++: no CUDA headers.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/quant_math.h"
#include "engine/model/float16.h"
#include "engine/quant/blocks.h"
#include "engine/quant/quant.h"

namespace tessera::cuda::testing {

using quant::QuantType;

inline constexpr QuantType kAllQuantTypes[] = {
    QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1, QuantType::kQ5_0,
    QuantType::kQ5_1, QuantType::kQ4_K, QuantType::kQ5_K, QuantType::kQ6_K};

// Tolerance of the GEMV (f32 sums) against twin::QuantLinear (double sums),
// relative to Σ|w·x| of the output. Each lane adds at most cols / 32
// products with fmaf (one rounding of at most 2⁻²⁴ of the running sum,
// itself at most Σ|w·x|), and the warp's tree adds 5 more roundings: the
// error is at most (cols / 32 + 5) · 2⁻²⁴ · Σ|w·x| ≈ 2.2e-6 · Σ|w·x| for
// cols = 1024, the largest tested; the twin's rounding to float adds
// 2⁻²⁴. 1e-5 leaves a margin of 4 and is still ~100 times smaller than
// the effect of one misread weight in a row of 1024.
inline constexpr double kQuantGemvRelTol = 1e-5;

// Calls f.template operator()<T>() with T = type, for code templated on
// the block type (quant_math.h).
template <typename F>
void ForQuantType(QuantType type, F&& f) {
  switch (type) {
    case QuantType::kQ4_0: return f.template operator()<QuantType::kQ4_0>();
    case QuantType::kQ4_1: return f.template operator()<QuantType::kQ4_1>();
    case QuantType::kQ5_0: return f.template operator()<QuantType::kQ5_0>();
    case QuantType::kQ5_1: return f.template operator()<QuantType::kQ5_1>();
    case QuantType::kQ8_0: return f.template operator()<QuantType::kQ8_0>();
    case QuantType::kQ4_K: return f.template operator()<QuantType::kQ4_K>();
    case QuantType::kQ5_K: return f.template operator()<QuantType::kQ5_K>();
    case QuantType::kQ6_K: return f.template operator()<QuantType::kQ6_K>();
  }
}

// rows × cols of random blocks. Every bit pattern of the integer fields
// (quants, qh, the packed 6-bit scales and mins, Q6_K's int8 scales) makes
// a valid block, so those are random bytes; the f16 fields are then set to
// scales of either sign (mins and offsets included) of the size real files
// have, so that dequantized weights stay within f16's range. With
// `raw_scales` the f16 fields keep their random bits too (huge, subnormal,
// infinite or NaN values), for bit-exactness tests of the formulas.
inline std::vector<uint8_t> RandomQuantBlocks(QuantType type, int64_t rows, int64_t cols,
                                              std::mt19937_64& rng, bool raw_scales = false) {
  const quant::QuantInfo& info = quant::Info(type);
  const int64_t blocks = rows * cols / info.block_elems;
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * info.block_bytes));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  if (raw_scales) return bytes;
  std::uniform_real_distribution<float> size(0.002f, 0.05f);
  auto scale = [&](float unit) { return (rng() & 1 ? unit : -unit) * size(rng); };
  auto put = [](uint8_t* p, float v) {
    const uint16_t h = FloatToHalf(v);
    std::memcpy(p, &h, 2);
  };
  const bool k_type = info.block_elems == quant::kQKK;
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* b = bytes.data() + i * info.block_bytes;
    if (type == QuantType::kQ6_K) {
      put(b + offsetof(quant::BlockQ6_K, d), scale(1.0f / 64));
    } else if (k_type) {  // d, dmin: x = d·sc·q − dmin·m with sc, m < 64
      put(b, scale(1.0f / 16)), put(b + 2, scale(1.0f / 16));
    } else {  // d, and m for the _1 types
      put(b, scale(1.0f));
      if (type == QuantType::kQ4_1 || type == QuantType::kQ5_1) put(b + 2, scale(8.0f));
    }
  }
  return bytes;
}

// The weights of rows of blocks, [rows, cols], by quant::DequantizeRow.
inline std::vector<float> DequantizeRows(QuantType type, const std::vector<uint8_t>& blocks,
                                         int64_t rows, int64_t cols) {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  const int64_t row_bytes = quant::RowBytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    quant::DequantizeRow(type, blocks.data() + r * row_bytes, w.data() + r * cols, cols);
  }
  return w;
}

// Σ_c |x[i, c] · w[r, c]| for each output [n, rows]: the scale of the
// rounding error of a sum of those products.
inline std::vector<double> AbsProductSums(const std::vector<float>& x, int32_t n,
                                          const std::vector<float>& w, int64_t rows,
                                          int64_t cols) {
  std::vector<double> sums(static_cast<size_t>(n * rows), 0.0);
  for (int32_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        sums[i * rows + r] += std::fabs(double(x[i * cols + c]) * w[r * cols + c]);
      }
    }
  }
  return sums;
}

// y[n, rows] as the GEMV kernel computes it: each of the 32 lanes of a row's
// warp runs GemvLane (the kernel's own code, quant_math.h), then the lanes'
// partials are summed by the same xor-shuffle tree as WarpSum
// (device_util.cuh). Same operations in the same order, fmaf included, so a
// GPU should reproduce this bit for bit.
inline std::vector<float> EmulatedQuantGemv(const std::vector<float>& x, int32_t n,
                                            const std::vector<uint8_t>& w, QuantType type,
                                            int64_t rows, int64_t cols) {
  std::vector<float> y(static_cast<size_t>(n * rows));
  const int64_t row_bytes = quant::RowBytes(type, cols);
  ForQuantType(type, [&]<QuantType T>() {
    for (int64_t r = 0; r < rows; ++r) {
      float acc[32][kQuantGemvMaxRows] = {};
      for (int lane = 0; lane < 32; ++lane) {
        GemvLane<T>(w.data() + r * row_bytes, cols, x.data(), n, lane, acc[lane]);
      }
      for (int32_t i = 0; i < n; ++i) {
        float v[32];
        for (int lane = 0; lane < 32; ++lane) v[lane] = acc[lane][i];
        for (int o = 16; o > 0; o >>= 1) {
          float next[32];
          for (int lane = 0; lane < 32; ++lane) next[lane] = v[lane] + v[lane ^ o];
          std::memcpy(v, next, sizeof(v));
        }
        y[i * rows + r] = v[0];
      }
    }
  });
  return y;
}

}  // namespace tessera::cuda::testing
