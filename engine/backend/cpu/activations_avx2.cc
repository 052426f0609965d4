// AVX2 + FMA activation kernels (see kernels.h), 8 elements at a time, the
// twins of activations_avx512.cc for CPUs without AVX-512.
#include <immintrin.h>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX2)

#include "engine/backend/cpu/exp_avx2.h"

namespace tessera::cpu {
namespace {

constexpr int64_t kLanes = 8;

// Lanes [0, n) all-ones, the rest zero, for n in [1, 8].
inline __m256i TailMask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// x / (1 + e^-z), that is x·sigmoid(z). Where e^-z overflows float it is
// +inf, as in the scalar formula, so a very negative z gives ±0 and z = −inf
// with x = −inf gives NaN; NaN stays NaN.
inline __m256 TimesSigmoid(__m256 x, __m256 z) {
  const __m256 m = _mm256_sub_ps(_mm256_setzero_ps(), z);
  const __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(88.0f), _CMP_GT_OQ);
  const __m256 e = _mm256_blendv_ps(ExpAvx2(m), _mm256_set1_ps(__builtin_inff()), big);
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// gelu_tanh(v) = 0.5·v·(1 + tanh(y)) = v·sigmoid(2y), y = √(2/π)·(v + 0.044715·v³).
inline __m256 GeluVec(__m256 v) {
  const __m256 a = _mm256_set1_ps(2.0f * 0.7978845608028654f);
  const __m256 b = _mm256_set1_ps(2.0f * 0.7978845608028654f * 0.044715f);
  const __m256 z = _mm256_mul_ps(v, _mm256_fmadd_ps(b, _mm256_mul_ps(v, v), a));
  return TimesSigmoid(v, z);
}

// Applies f(a[i], b[i]) over [0, count), the tail with masked loads.
template <typename F>
inline void Map2(const float* a, const float* b, int64_t count, float* out, F f) {
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  if (i < count) {
    const __m256i m = TailMask(count - i);
    _mm256_maskstore_ps(out + i, m, f(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  }
}

}  // namespace

void SwiGluAvx2(const float* gate, const float* up, int64_t count, float* out) {
  Map2(gate, up, count, out,
       [](__m256 g, __m256 u) { return _mm256_mul_ps(TimesSigmoid(g, g), u); });
}

void GeluAvx2(float* x, int64_t count) {
  Map2(x, x, count, x, [](__m256 v, __m256) { return GeluVec(v); });
}

void GeGluAvx2(const float* gate, const float* up, int64_t count, float* out) {
  Map2(gate, up, count, out, [](__m256 g, __m256 u) { return _mm256_mul_ps(GeluVec(g), u); });
}

}  // namespace tessera::cpu

TESSERA_ISA_END
