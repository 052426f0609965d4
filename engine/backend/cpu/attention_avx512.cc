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

// Up to 16 consecutive KV elements as f32 (masked-off lanes are 0).
template <typename T>
inline __m512 Load(__mmask16 m, const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
}

// scores[j] = q·k_j · scale for every visible key, 16 keys per vector: lane
// o accumulates q[d]·K[d][o] over d in order. Returns the largest score.
template <typename T>
float Scores(const float* q, const KeyBlocksT<T>& k, int32_t head_dim, float scale,
             int32_t visible, float* scores) {
  __m512 max_v = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int32_t b = 0, j0 = 0; j0 < visible; ++b, j0 += k.block_size) {
    const T* block = k.Block(b);
    for (int32_t o = 0; o < k.block_size && j0 + o < visible; o += 16) {
      const __mmask16 m = TailMask(std::min(k.block_size - o, visible - j0 - o));
      __m512 acc = _mm512_setzero_ps();
      for (int32_t d = 0; d < head_dim; ++d) {
        acc = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), Load(m, block + int64_t{d} * k.block_size + o),
                              acc);
      }
      acc = _mm512_mul_ps(acc, _mm512_set1_ps(scale));
      _mm512_mask_storeu_ps(scores + j0 + o, m, acc);
      max_v = _mm512_mask_max_ps(max_v, m, max_v, acc);
    }
  }
  return _mm512_reduce_max_ps(max_v);
}

// out[c0 .. c0 + 16·chunks) = Σ_j p_j · v_j[...], over j in order.
template <typename T>
void WeightedSum(const KvRowsT<T>& v, const float* probs, int32_t visible, int32_t head_dim,
                 int32_t c0, int32_t chunks, float* out) {
  __m512 acc[kMaxChunks];
  __mmask16 mask[kMaxChunks];
  for (int32_t i = 0; i < chunks; ++i) {
    acc[i] = _mm512_setzero_ps();
    mask[i] = TailMask(head_dim - c0 - 16 * i);
  }
  v.ForEach(visible, [&](int32_t j, const T* row) {
    const __m512 p = _mm512_set1_ps(probs[j]);
    for (int32_t i = 0; i < chunks; ++i) {
      acc[i] = _mm512_fmadd_ps(p, Load(mask[i], row + c0 + 16 * i), acc[i]);
    }
  });
  for (int32_t i = 0; i < chunks; ++i) _mm512_mask_storeu_ps(out + c0 + 16 * i, mask[i], acc[i]);
}

}  // namespace

template <typename T>
void AttendRowAvx512(const float* q, const KeyBlocksT<T>& k, const KvRowsT<T>& v,
                     int32_t head_dim, float scale, int32_t visible, float* scores, float* out) {
  const float max_score = Scores(q, k, head_dim, scale, visible, scores);
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

template void AttendRowAvx512<float>(const float*, const KeyBlocksT<float>&,
                                     const KvRowsT<float>&, int32_t, float, int32_t, float*,
                                     float*);
template void AttendRowAvx512<uint16_t>(const float*, const KeyBlocksT<uint16_t>&,
                                        const KvRowsT<uint16_t>&, int32_t, float, int32_t,
                                        float*, float*);

void FloatsToHalvesAvx512(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
  if (i < n) {
    const __mmask16 m = TailMask(static_cast<int32_t>(n - i));
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(dst + i, m, h);
  }
}

}  // namespace tessera::cpu
