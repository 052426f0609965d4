// AVX-512 twin of QuantizeActivations (quant_linear.h), built for
// AVX-512 and chosen at run time. Per block of 32: the same maximum of
// |x| (exact in any order), the same IEEE divisions for d and 1/d, the same
// products rounded to nearest even (vcvtps2dq under the default rounding
// mode, as nearbyint), and exact integer sums, so the bytes, scales and sums
// are the portable function's for every finite input.
#include <immintrin.h>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX512)

// GCC 12's avx512fintrin.h builds some intrinsics on deliberately undefined
// registers and then warns about them.
namespace tessera::cpu {

void QuantizeActivationsAvx512(const float* x, int64_t begin, int64_t end, QuantizedRows& out) {
  const int64_t k = out.k, blocks = k / kActBlock;
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const float* v = x + i * k + blk * kActBlock;
      const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const float d = ActivationStep(amax);
      const __m512 inv = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inv));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inv));
      int8_t* q = out.q.data() + i * k + blk * kActBlock;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(q1));
      out.d[i * blocks + blk] = d;
      out.sums[i * (k / kActSumBlock) + 2 * blk] = _mm512_reduce_add_epi32(q0);
      out.sums[i * (k / kActSumBlock) + 2 * blk + 1] = _mm512_reduce_add_epi32(q1);
    }
    InterleaveRow(out, i);
  }
}

}  // namespace tessera::cpu

TESSERA_ISA_END
