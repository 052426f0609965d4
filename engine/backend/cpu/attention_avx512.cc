// AVX-512 attention row kernel (see attention_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/backend/cpu/attention_kernels.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tessera::cpu {
namespace {

// Output chunks of 16 kept in registers at once (head_dim up to 128 in one
// pass over the values).
constexpr int32_t kMaxChunks = 8;

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

// out[c0 .. c0 + 16·chunks) = Σ_j p_j · v_j[...], over j in order.
void WeightedSum(const KvRows& v, const float* probs, int32_t visible, int32_t head_dim,
                 int32_t c0, int32_t chunks, float* out) {
  __m512 acc[kMaxChunks];
  __mmask16 mask[kMaxChunks];
  for (int32_t i = 0; i < chunks; ++i) {
    acc[i] = _mm512_setzero_ps();
    mask[i] = TailMask(head_dim - c0 - 16 * i);
  }
  v.ForEach(visible, [&](int32_t j, const float* row) {
    const __m512 p = _mm512_set1_ps(probs[j]);
    for (int32_t i = 0; i < chunks; ++i) {
      acc[i] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(mask[i], row + c0 + 16 * i), acc[i]);
    }
  });
  for (int32_t i = 0; i < chunks; ++i) _mm512_mask_storeu_ps(out + c0 + 16 * i, mask[i], acc[i]);
}

}  // namespace

void AttendRowAvx512(const float* q, const KvRows& k, const KvRows& v, int32_t head_dim,
                     float scale, int32_t visible, float* scores, float* out) {
  float max_score = -std::numeric_limits<float>::infinity();
  k.ForEach(visible, [&](int32_t j, const float* row) {
    scores[j] = Dot(q, row, head_dim) * scale;
    max_score = std::max(max_score, scores[j]);
  });
  double denom = 0.0;
  for (int32_t j = 0; j < visible; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    denom += scores[j];
  }
  const float inv = static_cast<float>(1.0 / denom);
  for (int32_t j = 0; j < visible; ++j) scores[j] *= inv;
  const int32_t total_chunks = (head_dim + 15) / 16;
  for (int32_t c = 0; c < total_chunks; c += kMaxChunks) {
    WeightedSum(v, scores, visible, head_dim, 16 * c, std::min(kMaxChunks, total_chunks - c), out);
  }
}

}  // namespace tessera::cpu
