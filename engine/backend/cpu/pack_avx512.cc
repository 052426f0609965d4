// The AVX-512 transpose that packs full panels of 32-bit elements (f32
// weights, and the AMX layout's bf16 pairs): built for AVX-512
// and called only where the CPU has them.
#include <immintrin.h>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX512)

namespace tessera::cpu {
namespace {

// out[c · 16 + l] = in[l · stride + c] for a 16 × 16 block: interleave
// 32-bit then 64-bit elements of row pairs, then gather 128-bit lanes.
inline void Transpose16x16(const uint32_t* in, int64_t stride, uint32_t* out) {
  __m512i r[16], t[16];
  for (int l = 0; l < 16; ++l) r[l] = _mm512_loadu_si512(in + l * stride);
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  // r[4k + c], lane j: rows 4k .. 4k + 3 of column 4j + c.
  for (int k = 0; k < 4; ++k) {
    r[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    r[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    r[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    r[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i even_lo = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
    const __m512i odd_lo = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xDD);
    const __m512i even_hi = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    const __m512i odd_hi = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xDD);
    _mm512_storeu_si512(out + (c) * 16, _mm512_shuffle_i32x4(even_lo, even_hi, 0x88));
    _mm512_storeu_si512(out + (8 + c) * 16, _mm512_shuffle_i32x4(even_lo, even_hi, 0xDD));
    _mm512_storeu_si512(out + (4 + c) * 16, _mm512_shuffle_i32x4(odd_lo, odd_hi, 0x88));
    _mm512_storeu_si512(out + (12 + c) * 16, _mm512_shuffle_i32x4(odd_lo, odd_hi, 0xDD));
  }
}

}  // namespace

int64_t PackFullPanel32Avx512(const uint32_t* rows, int64_t cols, uint32_t* panel) {
  const int64_t whole = cols / 16 * 16;
  for (int64_t p = 0; p < whole; p += 16) Transpose16x16(rows + p, cols, panel + p * kPanelRows);
  return whole;
}

}  // namespace tessera::cpu

TESSERA_ISA_END
