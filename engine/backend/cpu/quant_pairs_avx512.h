// Loads and stores of pairs of quantized tiles (16 outputs), shared by the
// AVX-512 quantized kernels (quant_linear_avx512vnni.cc,
// quant_linear_amx.cc, quant_linear_k_amx.cc), which include it inside
// their instruction-set regions; everything here has internal linkage, so
// that each file keeps the code built for its own instruction set.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "engine/backend/cpu/quant_linear.h"

namespace tessera::cpu {
namespace {  // NOLINT(build/namespaces): internal linkage per instruction set

// 32 bytes at a (low half) and 32 at b (high half).
inline __m512i LoadPair(const uint8_t* a, const uint8_t* b) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// 8 f16 at a and 8 at b, as 16 floats.
inline __m512 LoadHalvesPair(const uint8_t* a, const uint8_t* b) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

inline __m128i Load8(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}

// Asks for the cache lines of [p, p + bytes) ahead of their use.
inline void PrefetchBytes(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + line), _MM_HINT_T0);
  }
}

// Writes row i's outputs of tile t (and of tile t + 1 when `pair`).
inline void StorePair(__m512 acc, int64_t i, int64_t t, bool pair, const Weight& w,
                      const float* bias, float* y) {
  alignas(64) float out[2 * kQuantTileRows];
  _mm512_store_ps(out, acc);
  for (int h = 0; h < (pair ? 2 : 1); ++h) {
    const int64_t j0 = (t + h) * kQuantTileRows;
    const int64_t valid = std::min<int64_t>(kQuantTileRows, w.rows - j0);
    for (int64_t r = 0; r < valid; ++r) {
      y[i * w.rows + j0 + r] = out[h * kQuantTileRows + r] + (bias ? bias[j0 + r] : 0.0f);
    }
  }
}

}  // namespace
}  // namespace tessera::cpu
