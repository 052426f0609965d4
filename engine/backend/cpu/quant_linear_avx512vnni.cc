// AVX512-VNNI twin of QuantLinearPortable (quant_linear.h), compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni and chosen at run time.
//
// One register holds, for 4 inputs, the values of 16 rows: the 8 rows of
// tile t in the low half and those of tile t + 1 in the high half (each
// half is the 32 bytes that quant_linear_avx2.h loads). An input quad of
// an activation row is broadcast to every lane, so one vpdpbusd adds 16
// rows' partial dot products and no horizontal sums are needed.
//
// vpdpbusd multiplies unsigned by signed bytes. Signed weights (Q8_0, Q6_K)
// are stored biased, q + 128, by flipping their top bit here, and the dot
// product starts at -128·Σ q_x of the group, so Σ q_w·q_x comes out exact.
// The integer sums are exact and the float steps are the portable kernel's,
// lane by lane, so the outputs have the portable kernel's bits. The rows'
// steps and sums per group are gathered once per call (GatherRowSteps),
// not once per pair of tiles.
#include <immintrin.h>

#include <algorithm>

#include "engine/backend/cpu/quant_linear.h"

// GCC 12's avx512fintrin.h builds some intrinsics on deliberately undefined
// registers and then warns about them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tessera::cpu {
namespace {

constexpr int kRowsPerPass = 8;
constexpr int64_t kPrefetchBytes = 2048;

// 32 bytes at a (low half) and 32 at b (high half).
inline __m512i LoadPair(const uint8_t* a, const uint8_t* b) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}


// 8 f16 at a and 8 at b, as 16 floats.
inline __m512 LoadHalvesPair(const uint8_t* a, const uint8_t* b) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

// 16 rows' scales (or offsets) of a group: float(A or B of the superblock)
// times the group's int8 (or the type's constant), exact as in GroupAffine.
template <bool kPerGroupInts>
inline __m512 GroupFactor(__m512 super_scale, const uint8_t* ints_a, const uint8_t* ints_b,
                          float constant) {
  if constexpr (kPerGroupInts) {
    const __m128i i8 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ints_a)),
                                          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(ints_b)));
    return _mm512_mul_ps(super_scale, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(i8)));
  } else {
    return _mm512_mul_ps(super_scale, _mm512_set1_ps(constant));
  }
}

// Σ q_w·q_x of one group of both tiles for rows [i0, i0 + R) of x: xq
// points at the group's first quad of row i0 in x.quads (quad u of row
// i0 + r at xq[u · kQuadRows + r]); xsum[r] is Σ q_x of row i0 + r over the
// group.
template <int R, typename F>
inline void RecordDots(const uint8_t* ra, const uint8_t* rb, const int32_t* xq,
                       const int32_t* xsum, __m512i dot[R]) {
  // Few rows: two accumulators per row (even and odd quads, summed at the
  // end; integer sums are exact), so that vpdpbusd's latency overlaps.
  constexpr int kSplit = R <= 2 ? 2 : 1;
  __m512i part[kSplit][R];
  for (int r = 0; r < R; ++r) {
    part[0][r] = F::kSigned ? _mm512_set1_epi32(-128 * xsum[r]) : _mm512_setzero_si512();
    if constexpr (kSplit == 2) part[1][r] = _mm512_setzero_si512();
  }
  if constexpr (F::kNibbles) {
    const __m512i low = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int p = 0; p < F::kGroup / 8; ++p) {
      const __m512i w = LoadPair(ra + 32 * p, rb + 32 * p);
      const __m512i lo = _mm512_and_si512(w, low);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512i& even = part[0][r];
        __m512i& odd = part[kSplit - 1][r];
        even = _mm512_dpbusd_epi32(even, lo, _mm512_set1_epi32(xq[(2 * p) * kQuadRows + r]));
        odd = _mm512_dpbusd_epi32(odd, hi, _mm512_set1_epi32(xq[(2 * p + 1) * kQuadRows + r]));
      }
    }
  } else {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int p = 0; p < F::kGroup / 4; ++p) {
      __m512i w = LoadPair(ra + 32 * p, rb + 32 * p);
      if constexpr (F::kSigned) w = _mm512_xor_si512(w, bias);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512i& acc = part[p % kSplit][r];
        acc = _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(xq[p * kQuadRows + r]));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    dot[r] = kSplit == 2 ? _mm512_add_epi32(part[0][r], part[kSplit - 1][r]) : part[0][r];
  }
}

// Rows [i0, i0 + R) of x against tiles ta and tb; acc[r] gets row i0 + r's
// 16 outputs (ta's 8, then tb's).
template <int R, typename F>
void PairPass(const uint8_t* ta, const uint8_t* tb, const QuantRecord& rec,
              const QuantizedRows& x, const RowSteps& steps, int64_t i0, __m512 acc[R]) {
  const int64_t k = x.k, n = x.n, supers = k / F::kGroup / rec.groups_per_super;
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    const uint8_t* sa = ta + s * rec.super_bytes;
    const uint8_t* sb = tb + s * rec.super_bytes;
    const __m512 super_a = LoadHalvesPair(sa, sb);
    const __m512 super_b =
        F::kHasB ? LoadHalvesPair(sa + 2 * kQuantTileRows, sb + 2 * kQuantTileRows)
                 : _mm512_setzero_ps();
    for (int64_t gg = 0; gg < rec.groups_per_super; ++gg) {
      const int64_t offset = rec.header_bytes + gg * rec.bytes;
      if constexpr (R <= 2) {
        // Few rows: streaming the weights is the bound; ask for both tiles'
        // bytes ahead (past a tile's end: the next tile, read next).
        for (int64_t line = 0; line < rec.bytes; line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(sa + offset + kPrefetchBytes + line), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(sb + offset + kPrefetchBytes + line), _MM_HINT_T0);
        }
      }
      const int64_t g = s * rec.groups_per_super + gg, first = g * F::kGroup;
      const float* dx = steps.dx.data() + g * n + i0;
      const float* dsum = steps.dsum.data() + g * n + i0;
      __m512i dot[R];
      RecordDots<R, F>(sa + offset, sb + offset, QuadsAt(x, i0, first / 4),
                       steps.xsum.data() + g * n + i0, dot);
      const uint8_t* ints_a = sa + offset + rec.value_bytes;
      const uint8_t* ints_b = sb + offset + rec.value_bytes;
      const __m512 a = GroupFactor<F::kPerGroupInts>(super_a, ints_a, ints_b, 1.0f);
      for (int r = 0; r < R; ++r) {
        const __m512 step = _mm512_mul_ps(a, _mm512_set1_ps(dx[r]));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r]), step, acc[r]);
      }
      if constexpr (F::kHasB) {
        const __m512 b = GroupFactor<F::kPerGroupInts>(super_b, ints_a + kQuantTileRows,
                                                       ints_b + kQuantTileRows, rec.sb_const);
        for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(b, _mm512_set1_ps(dsum[r]), acc[r]);
      }
    }
  }
}

// Writes row i's outputs of tile t (and of tile t + 1 when `pair`).
inline void StorePair(__m512 acc, int64_t i, int64_t t, bool pair, const Weight& w,
                      const float* bias, float* y) {
  alignas(64) float out[2 * kQuantTileRows];
  _mm512_store_ps(out, acc);
  for (int h = 0; h < (pair ? 2 : 1); ++h) {
    const int64_t j0 = (t + h) * kQuantTileRows;
    const int64_t valid = std::min<int64_t>(kQuantTileRows, w.rows - j0);
    for (int64_t r = 0; r < valid; ++r) {
      y[i * w.rows + j0 + r] = out[h * kQuantTileRows + r] + (bias ? bias[j0 + r] : 0.0f);
    }
  }
}

template <int R, typename F>
inline void Rows(const uint8_t* ta, const uint8_t* tb, const QuantRecord& rec,
                 const QuantizedRows& x, const RowSteps& steps, int64_t i, int64_t t, bool pair,
                 const Weight& w, const float* bias, float* y) {
  __m512 acc[R];
  PairPass<R, F>(ta, tb, rec, x, steps, i, acc);
  for (int r = 0; r < R; ++r) StorePair(acc[r], i + r, t, pair, w, bias, y);
}

template <typename F>
void Run(const QuantizedRows& x, const Weight& w, const float* bias, float* y, int64_t t0,
         int64_t t1, const QuantRecord& rec) {
  const int64_t tile_bytes = QuantTileBytes(rec, w.cols);
  const RowSteps& steps = GatherRowSteps(x, F::kGroup);
  for (int64_t t = t0; t < t1; t += 2) {
    // A last tile without a partner is computed twice (both halves) and
    // stored once.
    const bool pair = t + 1 < t1;
    const uint8_t* ta = static_cast<const uint8_t*>(w.data) + t * tile_bytes;
    const uint8_t* tb = pair ? ta + tile_bytes : ta;
    int64_t i = 0;
    for (; i + kRowsPerPass <= x.n; i += kRowsPerPass) {
      Rows<kRowsPerPass, F>(ta, tb, rec, x, steps, i, t, pair, w, bias, y);
    }
    if (x.n - i >= 4) {
      Rows<4, F>(ta, tb, rec, x, steps, i, t, pair, w, bias, y);
      i += 4;
    }
    switch (x.n - i) {
      case 3: Rows<3, F>(ta, tb, rec, x, steps, i, t, pair, w, bias, y); break;
      case 2: Rows<2, F>(ta, tb, rec, x, steps, i, t, pair, w, bias, y); break;
      case 1: Rows<1, F>(ta, tb, rec, x, steps, i, t, pair, w, bias, y); break;
      default: break;
    }
  }
}

}  // namespace

void QuantLinearAvx512Vnni(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                           int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  VisitQuantForm(w.dtype, [&](auto form) {
    Run<decltype(form)>(x, w, bias, y, tile_begin, tile_end, rec);
  });
}

}  // namespace tessera::cpu
