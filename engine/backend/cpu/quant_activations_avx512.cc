// AVX-512 twin of QuantizeActivations (quant_linear.h), built for
// AVX-512 and chosen at run time. Per block: the same maximum of
// |x| (exact in any order), the same IEEE divisions for d and 1/d, the same
// products rounded to nearest even (vcvtps2dq under the default rounding
// mode, as nearbyint), and exact integer sums, so the bytes, scales and sums
// are the portable function's for every finite input.
#include <immintrin.h>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX512)

// GCC 12's avx512fintrin.h builds some intrinsics on deliberately undefined
// registers and then warns about them; TESSERA_ISA_BEGIN silences that.
namespace tessera::cpu {

void QuantizeActivationsAvx512(const float* x, int64_t begin, int64_t end, QuantizedRows& out) {
  const int64_t k = out.k, block = out.block;
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t blk = 0; blk < k / block; ++blk) {
      const float* v = x + i * k + blk * block;
      __m512 m = _mm512_setzero_ps();
      for (int64_t c = 0; c < block; c += 16) {
        m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(v + c)));
      }
      const float d = ActivationStep(_mm512_reduce_max_ps(m));
      const __m512 inv = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
      for (int64_t c = 0; c < block; c += kActSumBlock) {
        const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(v + c), inv));
        const int64_t first = blk * block + c;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out.q.data() + i * k + first),
                         _mm512_cvtsepi32_epi8(q));
        out.sums[i * (k / kActSumBlock) + first / kActSumBlock] = _mm512_reduce_add_epi32(q);
      }
      out.d[i * (k / block) + blk] = d;
    }
    InterleaveRow(out, i);
  }
}

}  // namespace tessera::cpu

TESSERA_ISA_END
