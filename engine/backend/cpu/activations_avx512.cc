// AVX-512 activation kernels (see kernels.h), 16 elements at a time.
#include <immintrin.h>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX512)

#include "engine/backend/cpu/exp_avx512.h"

// GCC 12 warns inside its own masked-intrinsic headers.
namespace tessera::cpu {
namespace {

// x / (1 + e^-z), that is x·sigmoid(z), in the scalar path's order. -z is
// clamped to [-100, 100], far outside float's range of e^x, so very large
// |z| still gives e^-z = 0 or +inf; NaN stays NaN through x and z.
inline __m512 TimesSigmoid(__m512 x, __m512 z) {
  const __m512 m = _mm512_sub_ps(_mm512_setzero_ps(), z);
  const __m512 e = ExpAvx512(_mm512_min_ps(_mm512_max_ps(m, _mm512_set1_ps(-100.0f)),
                                           _mm512_set1_ps(100.0f)));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// gelu_tanh(v) = 0.5·v·(1 + tanh(y)) = v·sigmoid(2y), y = √(2/π)·(v + 0.044715·v³).
inline __m512 GeluVec(__m512 v) {
  const __m512 a = _mm512_set1_ps(2.0f * 0.7978845608028654f);
  const __m512 b = _mm512_set1_ps(2.0f * 0.7978845608028654f * 0.044715f);
  const __m512 z = _mm512_mul_ps(v, _mm512_fmadd_ps(b, _mm512_mul_ps(v, v), a));
  return TimesSigmoid(v, z);
}

// Applies f(a[i], b[i]) over [0, count), the tail with masked loads.
template <typename F>
inline void Map2(const float* a, const float* b, int64_t count, float* out, F f) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 m = count - i >= 16 ? static_cast<__mmask16>(0xffff)
                                         : static_cast<__mmask16>((1u << (count - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, f(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

}  // namespace

void SwiGluAvx512(const float* gate, const float* up, int64_t count, float* out) {
  Map2(gate, up, count, out,
       [](__m512 g, __m512 u) { return _mm512_mul_ps(TimesSigmoid(g, g), u); });
}

void GeluAvx512(float* x, int64_t count) {
  Map2(x, x, count, x, [](__m512 v, __m512) { return GeluVec(v); });
}

void GeGluAvx512(const float* gate, const float* up, int64_t count, float* out) {
  Map2(gate, up, count, out, [](__m512 g, __m512 u) { return _mm512_mul_ps(GeluVec(g), u); });
}

}  // namespace tessera::cpu

TESSERA_ISA_END
