// Quantized test weights and a CPU emulation of the CUDA quantized GEMV,
// shared by the CPU test of the twins (tests/cuda_twins_test.cc) and the
// GPU test (tests/gpu/quant_gemv_test.cc). Pure C++: no CUDA headers.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
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
    QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1,   QuantType::kQ5_0,
    QuantType::kQ5_1, QuantType::kQ4_K, QuantType::kQ5_K,   QuantType::kQ6_K,
    QuantType::kQ2_K, QuantType::kQ3_K, QuantType::kIQ4_NL, QuantType::kIQ4_XS};
static_assert(std::size(kAllQuantTypes) == quant::kNumQuantTypes);

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
    case QuantType::kQ2_K: return f.template operator()<QuantType::kQ2_K>();
    case QuantType::kQ3_K: return f.template operator()<QuantType::kQ3_K>();
    case QuantType::kIQ4_NL: return f.template operator()<QuantType::kIQ4_NL>();
    case QuantType::kIQ4_XS: return f.template operator()<QuantType::kIQ4_XS>();
  }
}

// Sets the f16 fields of one block of `type` at b: scale(unit) draws a
// value of either sign of size unit · [0.002, 0.05), unit chosen for the
// type's integer factors so that no weight exceeds about 3 (Q4_K: d·sc·q
// ≤ d·63·15, Q2_K: d·15·3, Q3_K: d·32·4, IQ4_NL: d·127, IQ4_XS: d·32·127).
template <typename Scale>
void PutBlockScales(QuantType type, uint8_t* b, Scale&& scale) {
  auto put = [b](size_t offset, float v) {
    const uint16_t h = FloatToHalf(v);
    std::memcpy(b + offset, &h, 2);
  };
  switch (type) {
    case QuantType::kQ4_0:
    case QuantType::kQ5_0:
    case QuantType::kQ8_0: return put(0, scale(1.0f));
    case QuantType::kQ4_1:
    case QuantType::kQ5_1:  // d, and the offset m (Q5_1 lays them out as Q4_1)
      put(offsetof(quant::BlockQ4_1, d), scale(1.0f));
      return put(offsetof(quant::BlockQ4_1, m), scale(8.0f));
    case QuantType::kQ4_K:
    case QuantType::kQ5_K:  // d, dmin (as in Q4_K): x = d·sc·q − dmin·m, sc, m < 64
      put(offsetof(quant::BlockQ4_K, d), scale(1.0f / 16));
      return put(offsetof(quant::BlockQ4_K, dmin), scale(1.0f / 16));
    case QuantType::kQ6_K: return put(offsetof(quant::BlockQ6_K, d), scale(1.0f / 64));
    case QuantType::kQ2_K:  // d, dmin: x = d·sc·q − dmin·m with sc, m < 16
      put(offsetof(quant::BlockQ2_K, d), scale(1.0f / 4));
      return put(offsetof(quant::BlockQ2_K, dmin), scale(1.0f / 4));
    case QuantType::kQ3_K: return put(offsetof(quant::BlockQ3_K, d), scale(1.0f / 8));
    case QuantType::kIQ4_NL: return put(offsetof(quant::BlockIQ4_NL, d), scale(1.0f / 8));
    case QuantType::kIQ4_XS: return put(offsetof(quant::BlockIQ4_XS, d), scale(1.0f / 64));
  }
}

// rows × cols of random blocks. Every bit pattern of the integer fields
// (quants, qh, hmask, the packed 6-bit scales and mins, Q6_K's int8 scales,
// IQ4_XS's scales_h) makes a valid block, so those are random bytes; the
// f16 fields are then set to scales of either sign (mins and offsets
// included) of the size real files have, so that dequantized weights stay
// within f16's range (PutBlockScales). With `raw_scales` the f16 fields
// keep their random bits too (huge, subnormal, infinite or NaN values), for
// bit-exactness tests of the formulas.
inline std::vector<uint8_t> RandomQuantBlocks(QuantType type, int64_t rows, int64_t cols,
                                              std::mt19937_64& rng, bool raw_scales = false) {
  const quant::QuantInfo& info = quant::Info(type);
  const int64_t blocks = rows * cols / info.block_elems;
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * info.block_bytes));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  if (raw_scales) return bytes;
  std::uniform_real_distribution<float> size(0.002f, 0.05f);
  auto scale = [&](float unit) { return (rng() & 1 ? unit : -unit) * size(rng); };
  for (int64_t i = 0; i < blocks; ++i) {
    PutBlockScales(type, bytes.data() + i * info.block_bytes, scale);
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
