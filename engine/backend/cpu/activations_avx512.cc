// AVX-512 activation kernels (see kernels.h), 16 elements at a time.
#include <immintrin.h>

#include "engine/backend/cpu/exp_avx512.h"
#include "engine/backend/cpu/kernels.h"

// GCC 12 warns inside its own masked-intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tessera::cpu {

void SwiGluAvx512(const float* gate, const float* up, int64_t count, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = count - i >= 16 ? static_cast<__mmask16>(0xffff)
                                         : static_cast<__mmask16>((1u << (count - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    // silu(g) · u = g / (1 + e^-g) · u, in the scalar path's order. -g is
    // clamped to [-100, 100], far outside float's range of e^x, so huge
    // gates still give e^-g = 0 or +inf; NaN stays NaN through g itself.
    const __m512 minus_g = _mm512_sub_ps(_mm512_setzero_ps(), g);
    const __m512 e = ExpAvx512(_mm512_min_ps(_mm512_max_ps(minus_g, _mm512_set1_ps(-100.0f)),
                                             _mm512_set1_ps(100.0f)));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, u));
  }
}

}  // namespace tessera::cpu
