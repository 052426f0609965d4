// AVX2 twin of QuantizeActivations (quant_linear.h), built for AVX2,
// FMA and F16C and chosen at run time; the same bytes, scales and sums as
// the portable function for every finite input (see
// quant_activations_avx512.cc for why).
#include <immintrin.h>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX2)

namespace tessera::cpu {
namespace {

inline float MaxOf(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int32_t SumOf(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void QuantizeActivationsAvx2(const float* x, int64_t begin, int64_t end, QuantizedRows& out) {
  const int64_t k = out.k, block = out.block, chunks = block / 32;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t blk = 0; blk < k / block; ++blk) {
      const float* v = x + i * k + blk * block;
      __m256 m = _mm256_setzero_ps();
      for (int64_t c = 0; c < block; c += 8) {
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(v + c)));
      }
      const float d = ActivationStep(MaxOf(m));
      const __m256 inv = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
      for (int64_t ch = 0; ch < chunks; ++ch) {
        __m256i q[4];
        for (int j = 0; j < 4; ++j) {
          q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 32 * ch + 8 * j), inv));
        }
        // packs work within 128-bit lanes: [0-3, 8-11, 16-19, 24-27 | 4-7,
        // ...] back to input order.
        const __m256i bytes = _mm256_permutevar8x32_epi32(
            _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
            order);
        const int64_t first = blk * block + 32 * ch;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + i * k + first), bytes);
        int32_t* sums = out.sums.data() + i * (k / kActSumBlock) + first / kActSumBlock;
        sums[0] = SumOf(_mm256_add_epi32(q[0], q[1]));
        sums[1] = SumOf(_mm256_add_epi32(q[2], q[3]));
      }
      out.d[i * (k / block) + blk] = d;
    }
    InterleaveRow(out, i);
  }
}

}  // namespace tessera::cpu

TESSERA_ISA_END
