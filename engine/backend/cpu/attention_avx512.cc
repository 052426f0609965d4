// AVX-512 attention row kernel (see attention_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "engine/backend/cpu/attention_kernels.h"
#include "engine/backend/cpu/isa_target.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX512)

#include "engine/backend/cpu/exp_avx512.h"

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
  } else if constexpr (std::is_same_v<T, int8_t>) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
}

// 16 consecutive keys: where they start and which lanes exist.
template <typename T>
struct KeyGroup {
  const T* keys = nullptr;  // [head_dim][stride], lanes along the keys
  __mmask16 mask = 0;
  int32_t j0 = 0;           // index of the first key
};

// Scores of G key groups at once: G independent FMA chains hide the FMA
// latency. Lane o of group g accumulates q[d]·K[d][o] over d in order.
template <typename T, int G>
inline void ScoreGroups(const float* q, const KeyGroup<T>* groups, int64_t stride,
                        int32_t head_dim, float scale, float* scores, __m512& max_v) {
  __m512 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int32_t d = 0; d < head_dim; ++d) {
    const __m512 qd = _mm512_set1_ps(q[d]);
    for (int g = 0; g < G; ++g) {
      acc[g] = _mm512_fmadd_ps(qd, Load(groups[g].mask, groups[g].keys + d * stride), acc[g]);
    }
  }
  for (int g = 0; g < G; ++g) {
    const __m512 s = _mm512_mul_ps(acc[g], _mm512_set1_ps(scale));
    _mm512_mask_storeu_ps(scores + groups[g].j0, groups[g].mask, s);
    max_v = _mm512_mask_max_ps(max_v, groups[g].mask, max_v, s);
  }
}

// scores[j] = q·k_j · scale for every visible key, 16 keys per vector and
// four vectors at a time. Returns the largest score.
template <typename T>
float Scores(const float* q, const KeyBlocksT<T>& k, int32_t head_dim, float scale,
             int32_t visible, float* scores) {
  __m512 max_v = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  KeyGroup<T> pending[4];
  int n = 0;
  const int32_t blocks = (visible + k.block_size - 1) / k.block_size;
  for (int32_t b = 0, j0 = 0; j0 < visible; ++b, j0 += k.block_size) {
    PrefetchAhead(b, blocks, [&](int32_t i) { k.PrefetchBlock(i, head_dim); });
    const T* block = k.Block(b);
    for (int32_t o = 0; o < k.block_size && j0 + o < visible; o += 16) {
      pending[n++] = {block + o, TailMask(std::min(k.block_size - o, visible - j0 - o)), j0 + o};
      if (n == 4) {
        ScoreGroups<T, 4>(q, pending, k.block_size, head_dim, scale, scores, max_v);
        n = 0;
      }
    }
  }
  switch (n) {
    case 3: ScoreGroups<T, 3>(q, pending, k.block_size, head_dim, scale, scores, max_v); break;
    case 2: ScoreGroups<T, 2>(q, pending, k.block_size, head_dim, scale, scores, max_v); break;
    case 1: ScoreGroups<T, 1>(q, pending, k.block_size, head_dim, scale, scores, max_v); break;
    default: break;
  }
  return _mm512_reduce_max_ps(max_v);
}

// acc[i] += p · row[16·i ...] for the C output chunks of one key.
template <typename T, int C>
inline void AccumulateRow(__m512 (&acc)[C], __m512 p, const T* row, const __mmask16* mask) {
#pragma GCC unroll 8
  for (int i = 0; i < C; ++i) acc[i] = _mm512_fmadd_ps(p, Load(mask[i], row + 16 * i), acc[i]);
}

// out[c0 .. c0 + 16·C) = Σ_j p_j · v_j[...]. Even and odd keys go to
// separate accumulators (two chains per chunk for the FMA latency), each
// summed in key order, then added: the same for every layout and batch.
// C is a template argument so that the accumulators stay in registers.
template <typename T, int C>
void WeightedSumChunks(const KvRowsT<T>& v, const float* probs, int32_t visible,
                       int32_t head_dim, int32_t c0, float* out) {
  __m512 even[C], odd[C];
  __mmask16 mask[C];
#pragma GCC unroll 8
  for (int i = 0; i < C; ++i) {
    even[i] = odd[i] = _mm512_setzero_ps();
    mask[i] = TailMask(head_dim - c0 - 16 * i);
  }
  ForEachValueRowByParity<true>(v, visible, c0, [&](auto odd_key, int32_t j, const T* row) {
    AccumulateRow<T, C>(decltype(odd_key)::value ? odd : even, _mm512_set1_ps(probs[j]), row,
                        mask);
  });
#pragma GCC unroll 8
  for (int i = 0; i < C; ++i) {
    _mm512_mask_storeu_ps(out + c0 + 16 * i, mask[i], _mm512_add_ps(even[i], odd[i]));
  }
}

template <typename T>
void WeightedSum(const KvRowsT<T>& v, const float* probs, int32_t visible, int32_t head_dim,
                 int32_t c0, int32_t chunks, float* out) {
  switch (chunks) {
    case 8: return WeightedSumChunks<T, 8>(v, probs, visible, head_dim, c0, out);
    case 7: return WeightedSumChunks<T, 7>(v, probs, visible, head_dim, c0, out);
    case 6: return WeightedSumChunks<T, 6>(v, probs, visible, head_dim, c0, out);
    case 5: return WeightedSumChunks<T, 5>(v, probs, visible, head_dim, c0, out);
    case 4: return WeightedSumChunks<T, 4>(v, probs, visible, head_dim, c0, out);
    case 3: return WeightedSumChunks<T, 3>(v, probs, visible, head_dim, c0, out);
    case 2: return WeightedSumChunks<T, 2>(v, probs, visible, head_dim, c0, out);
    default: return WeightedSumChunks<T, 1>(v, probs, visible, head_dim, c0, out);
  }
}

// scores[j] = softmax over the visible scores, 16 at a time, with the sum
// kept per lane and reduced once (a fixed order for a given length).
void SoftmaxInPlace(float* scores, int32_t visible, float max_score) {
  const __m512 max_v = _mm512_set1_ps(max_score);
  __m512 sum = _mm512_setzero_ps();
  for (int32_t j = 0; j < visible; j += 16) {
    const __mmask16 m = TailMask(visible - j);
    const __m512 e = ExpAvx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + j), max_v));
    _mm512_mask_storeu_ps(scores + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int32_t j = 0; j < visible; j += 16) {
    const __mmask16 m = TailMask(visible - j);
    _mm512_mask_storeu_ps(scores + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, scores + j), inv));
  }
}

// --- Several query rows of one head at once (padded prefill) ---
// Each row's lanes run exactly the single-row arithmetic; the rows only
// share the loads of K and V.

// Scores of R rows against G key groups: one load of each key vector
// serves every row.
template <typename T, int R, int G>
inline void ScoreRowsGroups(const float* const* q, const KeyGroup<T>* groups, int64_t stride,
                            int32_t head_dim, float scale, float* const* scores) {
  __m512 acc[R][G];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  for (int32_t d = 0; d < head_dim; ++d) {
    __m512 kv[G];
    for (int g = 0; g < G; ++g) kv[g] = Load(groups[g].mask, groups[g].keys + d * stride);
    for (int r = 0; r < R; ++r) {
      const __m512 qd = _mm512_set1_ps(q[r][d]);
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(qd, kv[g], acc[r][g]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g) {
      _mm512_mask_storeu_ps(scores[r] + groups[g].j0, groups[g].mask,
                            _mm512_mul_ps(acc[r][g], _mm512_set1_ps(scale)));
    }
  }
}

// Groups of 16 keys scored at once for R rows: R·G accumulators, at most
// 16 (with 24, 8 rows of 3 groups, the compiler spills and the kernel runs
// half as fast).
template <int R>
constexpr int kScoreGroups = R <= 4 ? 4 : 2;

// ScoreRowsGroups for the first n (1 <= n <= G) pending groups.
template <typename T, int R, int G>
inline void ScorePendingGroups(int n, const float* const* q, const KeyGroup<T>* groups,
                               int64_t stride, int32_t head_dim, float scale,
                               float* const* scores) {
  if constexpr (G > 1) {
    if (n < G) {
      return ScorePendingGroups<T, R, G - 1>(n, q, groups, stride, head_dim, scale, scores);
    }
  }
  ScoreRowsGroups<T, R, G>(q, groups, stride, head_dim, scale, scores);
}

template <typename T, int R>
void RowsScores(const float* const* q, const KeyBlocksT<T>& k, int32_t head_dim, float scale,
                int32_t visible, float* const* scores) {
  constexpr int kG = kScoreGroups<R>;
  KeyGroup<T> pending[4];
  int n = 0;
  auto flush = [&] {
    if (n > 0) ScorePendingGroups<T, R, kG>(n, q, pending, k.block_size, head_dim, scale, scores);
    n = 0;
  };
  for (int32_t b = 0, j0 = 0; j0 < visible; ++b, j0 += k.block_size) {
    const T* block = k.Block(b);
    for (int32_t o = 0; o < k.block_size && j0 + o < visible; o += 16) {
      pending[n++] = {block + o, TailMask(std::min(k.block_size - o, visible - j0 - o)), j0 + o};
      if (n == kG) flush();
    }
  }
  flush();
}

float RowMax(const float* s, int32_t n) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int32_t j = 0; j < n; j += 16) {
    const __mmask16 mask = TailMask(n - j);
    m = _mm512_mask_max_ps(m, mask, m, _mm512_maskz_loadu_ps(mask, s + j));
  }
  return _mm512_reduce_max_ps(m);
}

// acc[r][i] += p_r · row[16·i ...] for R query rows: the rows share each
// load of a value row.
template <typename T, int R, int C>
inline void AccumulateRowRows(__m512 (&acc)[R][C], const float* const* probs, int32_t j,
                              const T* row, const __mmask16* mask) {
  __m512 p[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) p[r] = _mm512_set1_ps(probs[r][j]);
#pragma GCC unroll 4
  for (int i = 0; i < C; ++i) {
    const __m512 vv = Load(mask[i], row + 16 * i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][i] = _mm512_fmadd_ps(p[r], vv, acc[r][i]);
  }
}

// out_r = Σ_j p_r[j] · v_j for R rows, with the single-row kernel's
// even/odd accumulators and key order (R·C <= 8: 2·R·C accumulators).
template <typename T, int R, int C>
void WeightedSumRowsChunks(const KvRowsT<T>& v, const float* const* probs, int32_t visible,
                           int32_t head_dim, int32_t c0, float* const* out) {
  __m512 even[R][C], odd[R][C];
  __mmask16 mask[C];
#pragma GCC unroll 4
  for (int i = 0; i < C; ++i) {
    for (int r = 0; r < R; ++r) even[r][i] = odd[r][i] = _mm512_setzero_ps();
    mask[i] = TailMask(head_dim - c0 - 16 * i);
  }
  ForEachValueRowByParity<false>(v, visible, c0, [&](auto odd_key, int32_t j, const T* row) {
    if constexpr (decltype(odd_key)::value) {
      AccumulateRowRows<T, R, C>(odd, probs, j, row, mask);
    } else {
      AccumulateRowRows<T, R, C>(even, probs, j, row, mask);
    }
  });
#pragma GCC unroll 4
  for (int i = 0; i < C; ++i) {
    for (int r = 0; r < R; ++r) {
      _mm512_mask_storeu_ps(out[r] + c0 + 16 * i, mask[i], _mm512_add_ps(even[r][i], odd[r][i]));
    }
  }
}

// Two rows, up to 4 chunks of 16 per pass.
template <typename T>
void WeightedSumTwoRows(const KvRowsT<T>& v, const float* const* probs, int32_t visible,
                        int32_t head_dim, int32_t c0, int32_t chunks, float* const* out) {
  switch (chunks) {
    case 4: return WeightedSumRowsChunks<T, 2, 4>(v, probs, visible, head_dim, c0, out);
    case 3: return WeightedSumRowsChunks<T, 2, 3>(v, probs, visible, head_dim, c0, out);
    case 2: return WeightedSumRowsChunks<T, 2, 2>(v, probs, visible, head_dim, c0, out);
    default: return WeightedSumRowsChunks<T, 2, 1>(v, probs, visible, head_dim, c0, out);
  }
}

// Four rows, up to 2 chunks of 16 per pass.
template <typename T>
void WeightedSumFourRows(const KvRowsT<T>& v, const float* const* probs, int32_t visible,
                         int32_t head_dim, int32_t c0, int32_t chunks, float* const* out) {
  if (chunks >= 2) return WeightedSumRowsChunks<T, 4, 2>(v, probs, visible, head_dim, c0, out);
  WeightedSumRowsChunks<T, 4, 1>(v, probs, visible, head_dim, c0, out);
}

}  // namespace

// Keys before `first` (the sliding window) get probability exactly 0: the
// value sums add 0·v = 0 for them, the same as skipping them.
template <typename T>
void AttendRowAvx512(const float* q, const KeyBlocksT<T>& k, const KvRowsT<T>& v,
                     int32_t head_dim, float scale, int32_t first, int32_t visible,
                     float* scores, float* out) {
  float max_score = Scores(q, k, head_dim, scale, visible, scores);
  ApplyKeyScales(k, first, visible, scores);
  if (first > 0 || kScaledKv<T>) max_score = RowMax(scores + first, visible - first);
  SoftmaxInPlace(scores + first, visible - first, max_score);
  std::fill(scores, scores + first, 0.0f);
  ApplyValueScales(v, first, visible, scores);
  const int32_t total_chunks = (head_dim + 15) / 16;
  for (int32_t c = 0; c < total_chunks; c += kMaxChunks) {
    WeightedSum(v, scores, visible, head_dim, 16 * c, std::min(kMaxChunks, total_chunks - c), out);
  }
}

template void AttendRowAvx512<float>(const float*, const KeyBlocksT<float>&,
                                     const KvRowsT<float>&, int32_t, float, int32_t, int32_t,
                                     float*, float*);
template void AttendRowAvx512<uint16_t>(const float*, const KeyBlocksT<uint16_t>&,
                                        const KvRowsT<uint16_t>&, int32_t, float, int32_t,
                                        int32_t, float*, float*);
template void AttendRowAvx512<int8_t>(const float*, const KeyBlocksT<int8_t>&,
                                      const KvRowsT<int8_t>&, int32_t, float, int32_t, int32_t,
                                      float*, float*);

template <typename T>
void AttendRowsAvx512(const float* const* q, int rows, const KeyBlocksT<T>& k,
                      const KvRowsT<T>& v, int32_t head_dim, float scale, const int32_t* first,
                      const int32_t* visible, float* const* scores, float* const* out) {
  int32_t most = 0;
  for (int r = 0; r < rows; ++r) most = std::max(most, visible[r]);
  switch (rows) {
    case 8: RowsScores<T, 8>(q, k, head_dim, scale, most, scores); break;
    case 7: RowsScores<T, 7>(q, k, head_dim, scale, most, scores); break;
    case 6: RowsScores<T, 6>(q, k, head_dim, scale, most, scores); break;
    case 5: RowsScores<T, 5>(q, k, head_dim, scale, most, scores); break;
    case 4: RowsScores<T, 4>(q, k, head_dim, scale, most, scores); break;
    case 3: RowsScores<T, 3>(q, k, head_dim, scale, most, scores); break;
    case 2: RowsScores<T, 2>(q, k, head_dim, scale, most, scores); break;
    default: RowsScores<T, 1>(q, k, head_dim, scale, most, scores); break;
  }
  for (int r = 0; r < rows; ++r) {
    // Keys past a row's own position or before its window are masked:
    // probability 0.
    const int32_t f = first[r], count = visible[r] - first[r];
    ApplyKeyScales(k, f, visible[r], scores[r]);
    SoftmaxInPlace(scores[r] + f, count, RowMax(scores[r] + f, count));
    std::fill(scores[r], scores[r] + f, 0.0f);
    std::fill(scores[r] + visible[r], scores[r] + most, 0.0f);
    ApplyValueScales(v, f, visible[r], scores[r]);
  }
  const int32_t total_chunks = (head_dim + 15) / 16;
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    const int32_t most4 = std::max(std::max(visible[r], visible[r + 1]),
                                   std::max(visible[r + 2], visible[r + 3]));
    for (int32_t c = 0; c < total_chunks; c += 2) {
      WeightedSumFourRows(v, scores + r, most4, head_dim, 16 * c, std::min(2, total_chunks - c),
                          out + r);
    }
  }
  for (; r + 2 <= rows; r += 2) {
    for (int32_t c = 0; c < total_chunks; c += 4) {
      WeightedSumTwoRows(v, scores + r, std::max(visible[r], visible[r + 1]), head_dim, 16 * c,
                         std::min(4, total_chunks - c), out + r);
    }
  }
  for (; r < rows; ++r) {
    for (int32_t c = 0; c < total_chunks; c += kMaxChunks) {
      WeightedSum(v, scores[r], visible[r], head_dim, 16 * c,
                  std::min(kMaxChunks, total_chunks - c), out[r]);
    }
  }
}

template void AttendRowsAvx512<float>(const float* const*, int, const KeyBlocksT<float>&,
                                      const KvRowsT<float>&, int32_t, float, const int32_t*,
                                      const int32_t*, float* const*, float* const*);
template void AttendRowsAvx512<uint16_t>(const float* const*, int, const KeyBlocksT<uint16_t>&,
                                         const KvRowsT<uint16_t>&, int32_t, float,
                                         const int32_t*, const int32_t*, float* const*,
                                         float* const*);
template void AttendRowsAvx512<int8_t>(const float* const*, int, const KeyBlocksT<int8_t>&,
                                       const KvRowsT<int8_t>&, int32_t, float, const int32_t*,
                                       const int32_t*, float* const*, float* const*);

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

TESSERA_ISA_END
