// Pieces shared by the quantizers of quantize.cc and quantize_k.cc.
#pragma once

#include <bit>
#include <cstdint>

#include "engine/quant/blocks.h"

namespace tessera::quant::internal {

// Round to the nearest integer, ties to even, for |f| < 2^22: adding
// 1.5 · 2^23 leaves the integer in the low mantissa bits. This is the
// rounding ggml's K quantizers use (not roundf, which rounds ties away).
inline int NearestInt(float f) {
  const float biased = f + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(biased) & 0x007fffffu) - 0x00400000;
}

// The K types: nb super-blocks of 256 from x.
void QuantizeQ4K(const float* x, BlockQ4_K* y, int64_t nb);
void QuantizeQ5K(const float* x, BlockQ5_K* y, int64_t nb);
void QuantizeQ6K(const float* x, BlockQ6_K* y, int64_t nb);

}  // namespace tessera::quant::internal
