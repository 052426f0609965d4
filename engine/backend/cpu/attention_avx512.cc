// AVX-512 attention row kernel (see attention_kernels.h).
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "engine/backend/cpu/attention_kernels.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tessera::cpu {
namespace {

inline __mmask16 TailMask(int32_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>((1u << remaining) - 1);
}

// One accumulator over 16-wide chunks in order, then one reduction.
inline float Dot(const float* a, const float* b, int32_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int32_t c = 0; c < n; c += 16) {
    const __mmask16 m = TailMask(n - c);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + c), _mm512_maskz_loadu_ps(m, b + c), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace

void AttendRowAvx512(const float* q, const KvRows& k, const KvRows& v, int32_t head_dim,
                     float scale, int32_t visible, float* scores, float* out) {
  float max_score = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j < visible; ++j) {
    scores[j] = Dot(q, k.Row(j), head_dim) * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double denom = 0.0;
  for (int32_t j = 0; j < visible; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    denom += scores[j];
  }
  const float inv = static_cast<float>(1.0 / denom);
  for (int32_t c = 0; c < head_dim; c += 16) {
    const __mmask16 m = TailMask(head_dim - c);
    __m512 acc = _mm512_setzero_ps();
    for (int32_t j = 0; j < visible; ++j) {
      const __m512 p = _mm512_set1_ps(scores[j] * inv);
      acc = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(m, v.Row(j) + c), acc);
    }
    _mm512_mask_storeu_ps(out + c, m, acc);
  }
}

}  // namespace tessera::cpu
