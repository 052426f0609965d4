// AVX2 + FMA + F16C attention row kernels (see attention_kernels.h), the
// 8-lane twins of attention_avx512.cc for CPUs without AVX-512.
//
// Lane o of a key group accumulates q[d]·K[d][o] over d in order; a value
// lane accumulates p_j·v_j[c] over the even keys and over the odd keys in key
// order, then adds the two. Neither depends on how lanes are grouped into
// vectors or how many rows share a load, so AttendRowsAvx2 equals
// AttendRowAvx2 bit for bit for every row.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "engine/backend/cpu/attention_kernels.h"
#include "engine/backend/cpu/isa_target.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX2)

#include "engine/backend/cpu/exp_avx2.h"

namespace tessera::cpu {
namespace {

constexpr int32_t kLanes = 8;
// Output chunks of 8 per pass over the values: 2 accumulators per chunk for
// one row, 4 for two rows, within the 16 vector registers.
constexpr int32_t kMaxChunks = 6;
constexpr int32_t kMaxPairChunks = 3;

// Lanes [0, n) all-ones, the rest zero (n clamped to [0, 8]).
inline __m256i LaneMask(int32_t n) {
  n = std::clamp(n, 0, kLanes);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 8 consecutive KV elements as f32.
template <typename T>
inline __m256 LoadFull(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    int64_t bytes;
    std::memcpy(&bytes, p, sizeof(bytes));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes)));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

// The first n (< 8) of them, the other lanes 0; reads nothing past p + n.
template <typename T>
inline __m256 LoadPartial(const T* p, int32_t n, __m256i mask) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_maskload_ps(p, mask);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    int64_t bytes = 0;
    std::memcpy(&bytes, p, std::max(0, n));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes)));
  } else {
    alignas(16) uint16_t tmp[kLanes] = {};
    std::memcpy(tmp, p, sizeof(uint16_t) * std::max(0, n));
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
  }
}

template <typename T>
inline __m256 Load(const T* p, int32_t n, __m256i mask) {
  return n >= kLanes ? LoadFull(p) : LoadPartial(p, n, mask);
}

inline void Store(float* p, int32_t n, __m256i mask, __m256 x) {
  if (n >= kLanes) {
    _mm256_storeu_ps(p, x);
  } else {
    _mm256_maskstore_ps(p, mask, x);
  }
}

// Horizontal sum and max of 8 lanes, always in the same order.
inline float ReduceAdd(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float ReduceMax(__m256 x) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Up to 8 consecutive keys: where they start and which lanes exist.
template <typename T>
struct KeyGroup {
  const T* keys = nullptr;  // [head_dim][stride], lanes along the keys
  int32_t lanes = 0;
  __m256i mask{};
  int32_t j0 = 0;  // index of the first key
};

// Calls f(group) for every group of up to 8 keys in [0, visible), block by
// block, prefetching blocks ahead with kPrefetch.
template <bool kPrefetch, typename T, typename F>
inline void ForEachKeyGroup(const KeyBlocksT<T>& k, int32_t head_dim, int32_t visible, F&& f) {
  const int32_t blocks = kPrefetch ? (visible + k.block_size - 1) / k.block_size : 0;
  for (int32_t b = 0, j0 = 0; j0 < visible; ++b, j0 += k.block_size) {
    PrefetchAhead(b, blocks, [&](int32_t i) { k.PrefetchBlock(i, head_dim); });
    const T* block = k.Block(b);
    for (int32_t o = 0; o < k.block_size && j0 + o < visible; o += kLanes) {
      const int32_t lanes = std::min({kLanes, k.block_size - o, visible - j0 - o});
      f(KeyGroup<T>{block + o, lanes, LaneMask(lanes), j0 + o});
    }
  }
}

// Scores of R rows against G key groups: one load of each key vector serves
// every row; G independent FMA chains per row hide the FMA latency.
template <typename T, int R, int G>
inline void ScoreGroups(const float* const* q, const KeyGroup<T>* groups, int64_t stride,
                        int32_t head_dim, float scale, float* const* scores) {
  __m256 acc[R][G];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_ps();
  }
  for (int32_t d = 0; d < head_dim; ++d) {
    __m256 kv[G];
    for (int g = 0; g < G; ++g) {
      kv[g] = Load(groups[g].keys + d * stride, groups[g].lanes, groups[g].mask);
    }
    for (int r = 0; r < R; ++r) {
      const __m256 qd = _mm256_set1_ps(q[r][d]);
      for (int g = 0; g < G; ++g) acc[r][g] = _mm256_fmadd_ps(qd, kv[g], acc[r][g]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < G; ++g) {
      Store(scores[r] + groups[g].j0, groups[g].lanes, groups[g].mask,
            _mm256_mul_ps(acc[r][g], _mm256_set1_ps(scale)));
    }
  }
}

// scores[r][j] = q_r·k_j · scale for j in [0, visible), G groups at a time
// (fewer for more rows, so that the accumulators fit in registers).
template <typename T, int R>
void Scores(const float* const* q, const KeyBlocksT<T>& k, int32_t head_dim, float scale,
            int32_t visible, float* const* scores) {
  constexpr int kGroups = R <= 2 ? 4 : 2;
  KeyGroup<T> pending[kGroups];
  int n = 0;
  auto flush = [&]() __attribute__((always_inline)) {
    const int64_t stride = k.block_size;
    if constexpr (kGroups == 4) {
      if (n == 4) ScoreGroups<T, R, 4>(q, pending, stride, head_dim, scale, scores);
      if (n == 3) ScoreGroups<T, R, 3>(q, pending, stride, head_dim, scale, scores);
    }
    if (n == 2) ScoreGroups<T, R, 2>(q, pending, stride, head_dim, scale, scores);
    if (n == 1) ScoreGroups<T, R, 1>(q, pending, stride, head_dim, scale, scores);
    n = 0;
  };
  ForEachKeyGroup<R == 1>(k, head_dim, visible, [&](const KeyGroup<T>& group) {
    pending[n++] = group;
    if (n == kGroups) flush();
  });
  flush();
}

float RowMax(const float* s, int32_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int32_t j = 0; j < n; j += kLanes) {
    const int32_t lanes = n - j;
    const __m256i mask = LaneMask(lanes);
    const __m256 x = lanes >= kLanes ? _mm256_loadu_ps(s + j) : _mm256_maskload_ps(s + j, mask);
    m = _mm256_blendv_ps(m, _mm256_max_ps(m, x), _mm256_castsi256_ps(mask));
  }
  return ReduceMax(m);
}

// scores[j] = softmax over the visible scores, 8 at a time, with the sum
// kept per lane and reduced once (a fixed order for a given length).
void SoftmaxInPlace(float* scores, int32_t visible, float max_score) {
  const __m256 max_v = _mm256_set1_ps(max_score);
  __m256 sum = _mm256_setzero_ps();
  for (int32_t j = 0; j < visible; j += kLanes) {
    const int32_t lanes = visible - j;
    const __m256i mask = LaneMask(lanes);
    const __m256 x =
        lanes >= kLanes ? _mm256_loadu_ps(scores + j) : _mm256_maskload_ps(scores + j, mask);
    const __m256 e = _mm256_and_ps(ExpAvx2(_mm256_sub_ps(x, max_v)), _mm256_castsi256_ps(mask));
    Store(scores + j, lanes, mask, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / ReduceAdd(sum));
  for (int32_t j = 0; j < visible; j += kLanes) {
    const int32_t lanes = visible - j;
    const __m256i mask = LaneMask(lanes);
    const __m256 x =
        lanes >= kLanes ? _mm256_loadu_ps(scores + j) : _mm256_maskload_ps(scores + j, mask);
    Store(scores + j, lanes, mask, _mm256_mul_ps(x, inv));
  }
}

// The C output chunks [c0 + 8i, c0 + 8i + 8) of a pass: lanes and masks.
template <int C>
struct Chunks {
  int32_t lanes[C];
  __m256i mask[C];
  Chunks(int32_t head_dim, int32_t c0) {
    for (int i = 0; i < C; ++i) {
      lanes[i] = head_dim - c0 - kLanes * i;
      mask[i] = LaneMask(lanes[i]);
    }
  }
};

// out_r[c0 .. c0 + 8·C) = Σ_j p_r[j] · v_j[...] for R (1 or 2) rows: even
// and odd keys go to separate accumulators, each summed in key order, then
// added. C is a template argument so that the accumulators stay in
// registers.
template <typename T, int R, int C>
void WeightedSumChunks(const KvRowsT<T>& v, const float* const* probs, int32_t visible,
                       int32_t head_dim, int32_t c0, float* const* out) {
  __m256 even[R][C], odd[R][C];
  const Chunks<C> ch(head_dim, c0);
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < C; ++i) even[r][i] = odd[r][i] = _mm256_setzero_ps();
  }
  ForEachValueRowByParity<R == 1>(v, visible, c0, [&](auto odd_key, int32_t j, const T* row) {
    auto& acc = decltype(odd_key)::value ? odd : even;
    __m256 p[R];
    for (int r = 0; r < R; ++r) p[r] = _mm256_set1_ps(probs[r][j]);
#pragma GCC unroll 6
    for (int i = 0; i < C; ++i) {
      const __m256 x = Load(row + kLanes * i, ch.lanes[i], ch.mask[i]);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm256_fmadd_ps(p[r], x, acc[r][i]);
    }
  });
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < C; ++i) {
      Store(out[r] + c0 + kLanes * i, ch.lanes[i], ch.mask[i],
            _mm256_add_ps(even[r][i], odd[r][i]));
    }
  }
}

template <typename T, int R>
void WeightedSumPass(const KvRowsT<T>& v, const float* const* probs, int32_t visible,
                     int32_t head_dim, int32_t c0, int32_t chunks, float* const* out) {
  switch (chunks) {
    case 6: return WeightedSumChunks<T, R, 6>(v, probs, visible, head_dim, c0, out);
    case 5: return WeightedSumChunks<T, R, 5>(v, probs, visible, head_dim, c0, out);
    case 4: return WeightedSumChunks<T, R, 4>(v, probs, visible, head_dim, c0, out);
    case 3: return WeightedSumChunks<T, R, 3>(v, probs, visible, head_dim, c0, out);
    case 2: return WeightedSumChunks<T, R, 2>(v, probs, visible, head_dim, c0, out);
    default: return WeightedSumChunks<T, R, 1>(v, probs, visible, head_dim, c0, out);
  }
}

// All of head_dim in passes of at most `max_chunks` chunks, as even as
// possible (the split changes no lane's arithmetic).
template <typename T, int R>
void WeightedSum(const KvRowsT<T>& v, const float* const* probs, int32_t visible,
                 int32_t head_dim, int32_t max_chunks, float* const* out) {
  const int32_t total = (head_dim + kLanes - 1) / kLanes;
  const int32_t passes = (total + max_chunks - 1) / max_chunks;
  const int32_t per_pass = (total + passes - 1) / passes;
  for (int32_t c = 0; c < total; c += per_pass) {
    WeightedSumPass<T, R>(v, probs, visible, head_dim, kLanes * c, std::min(per_pass, total - c),
                          out);
  }
}

// Softmax of row r's window [first, visible) in place; scores outside it
// (up to `most`) become exactly 0.
void RowSoftmax(float* scores, int32_t first, int32_t visible, int32_t most) {
  SoftmaxInPlace(scores + first, visible - first, RowMax(scores + first, visible - first));
  std::fill(scores, scores + first, 0.0f);
  std::fill(scores + visible, scores + most, 0.0f);
}

}  // namespace

// Keys before `first` (the sliding window) get probability exactly 0: the
// value sums add 0·v = 0 for them, the same as skipping them.
template <typename T>
void AttendRowAvx2(const float* q, const KeyBlocksT<T>& k, const KvRowsT<T>& v, int32_t head_dim,
                   float scale, int32_t first, int32_t visible, float* scores, float* out) {
  Scores<T, 1>(&q, k, head_dim, scale, visible, &scores);
  ApplyKeyScales(k, first, visible, scores);
  RowSoftmax(scores, first, visible, visible);
  ApplyValueScales(v, first, visible, scores);
  WeightedSum<T, 1>(v, &scores, visible, head_dim, kMaxChunks, &out);
}

template void AttendRowAvx2<float>(const float*, const KeyBlocksT<float>&, const KvRowsT<float>&,
                                   int32_t, float, int32_t, int32_t, float*, float*);
template void AttendRowAvx2<uint16_t>(const float*, const KeyBlocksT<uint16_t>&,
                                      const KvRowsT<uint16_t>&, int32_t, float, int32_t, int32_t,
                                      float*, float*);
template void AttendRowAvx2<int8_t>(const float*, const KeyBlocksT<int8_t>&,
                                    const KvRowsT<int8_t>&, int32_t, float, int32_t, int32_t,
                                    float*, float*);

template <typename T>
void AttendRowsAvx2(const float* const* q, int rows, const KeyBlocksT<T>& k, const KvRowsT<T>& v,
                    int32_t head_dim, float scale, const int32_t* first, const int32_t* visible,
                    float* const* scores, float* const* out) {
  if (rows > 4) {  // 16 registers: at most 4 rows share the loads
    AttendRowsAvx2(q, 4, k, v, head_dim, scale, first, visible, scores, out);
    return AttendRowsAvx2(q + 4, rows - 4, k, v, head_dim, scale, first + 4, visible + 4,
                          scores + 4, out + 4);
  }
  int32_t most = 0;
  for (int r = 0; r < rows; ++r) most = std::max(most, visible[r]);
  switch (rows) {
    case 4: Scores<T, 4>(q, k, head_dim, scale, most, scores); break;
    case 3: Scores<T, 3>(q, k, head_dim, scale, most, scores); break;
    case 2: Scores<T, 2>(q, k, head_dim, scale, most, scores); break;
    default: Scores<T, 1>(q, k, head_dim, scale, most, scores); break;
  }
  for (int r = 0; r < rows; ++r) {
    ApplyKeyScales(k, first[r], visible[r], scores[r]);
    RowSoftmax(scores[r], first[r], visible[r], most);
    ApplyValueScales(v, first[r], visible[r], scores[r]);
  }
  int r = 0;
  for (; r + 2 <= rows; r += 2) {
    WeightedSum<T, 2>(v, scores + r, std::max(visible[r], visible[r + 1]), head_dim,
                      kMaxPairChunks, out + r);
  }
  for (; r < rows; ++r) {
    WeightedSum<T, 1>(v, scores + r, visible[r], head_dim, kMaxChunks, out + r);
  }
}

template void AttendRowsAvx2<float>(const float* const*, int, const KeyBlocksT<float>&,
                                    const KvRowsT<float>&, int32_t, float, const int32_t*,
                                    const int32_t*, float* const*, float* const*);
template void AttendRowsAvx2<uint16_t>(const float* const*, int, const KeyBlocksT<uint16_t>&,
                                       const KvRowsT<uint16_t>&, int32_t, float, const int32_t*,
                                       const int32_t*, float* const*, float* const*);
template void AttendRowsAvx2<int8_t>(const float* const*, int, const KeyBlocksT<int8_t>&,
                                     const KvRowsT<int8_t>&, int32_t, float, const int32_t*,
                                     const int32_t*, float* const*, float* const*);

void FloatsToHalvesAvx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  if (i < n) {
    alignas(32) float in[kLanes] = {};
    alignas(16) uint16_t h[kLanes];
    std::memcpy(in, src + i, sizeof(float) * (n - i));
    _mm_store_si128(reinterpret_cast<__m128i*>(h),
                    _mm256_cvtps_ph(_mm256_load_ps(in), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(dst + i, h, sizeof(uint16_t) * (n - i));
  }
}

}  // namespace tessera::cpu

TESSERA_ISA_END
