// AVX512-VNNI twin of QuantLinearPortable (quant_linear.h), built for
// AVX-512 F/BW/VL and AVX512-VNNI and chosen at run time.
//
// One register holds, for 4 inputs, the values of 16 rows: the 8 rows of
// tile t in the low half and those of tile t + 1 in the high half (each
// half is the 32 bytes that quant_linear_avx2.h loads). An input quad of
// an activation row is broadcast to every lane, so one vpdpbusd adds 16
// rows' partial dot products and no horizontal sums are needed. A pass
// takes three such pairs (48 outputs) and 4 activation rows: each broadcast
// feeds three vpdpbusd. On the AMD Zen 5 cores measured, broadcasts,
// shuffles and float steps take the vector ports vpdpbusd needs, so the
// fewer of them per product, the faster (one pair and 8 rows: 1.1-1.3x
// slower at 16 rows). What is left of a range runs one pair at a time.
//
// vpdpbusd multiplies unsigned by signed bytes. Signed weights (Q8_0, Q6_K)
// are stored biased, q + 128, by flipping their top bit here, and the dot
// product starts at -128·Σ q_x of the group, so Σ q_w·q_x comes out exact.
// For the K types, each group's dot products are multiplied by its scales
// (vpmulld) and added over the superblock, and the offsets' sums come from
// vpmaddwd over two groups at a time. The integer sums are exact and the
// float steps are the portable kernel's, lane by lane, so the outputs have
// the portable kernel's bits. The rows'
// steps and sums per group are gathered once per call (GatherRowSteps),
// not once per pair of tiles.
#include <immintrin.h>

#include <algorithm>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX512VNNI)

#include "engine/backend/cpu/quant_pairs_avx512.h"

// GCC 12's avx512fintrin.h builds some intrinsics on deliberately undefined
// registers and then warns about them; TESSERA_ISA_BEGIN silences that.
namespace tessera::cpu {
namespace {

constexpr int kPairs = kQuantTilesPerPass / 2;  // pairs of tiles per pass (48 outputs)
constexpr int kRowsPerPass = 4;
constexpr int64_t kPrefetchBytes = 2048;


// 8 bytes at a (low) and 8 at b (high).
inline __m128i LoadInts(const uint8_t* a, const uint8_t* b) {
  return _mm_unpacklo_epi64(Load8(a), Load8(b));
}

// W pairs of tiles: pair w is tiles t + 2w (low half of a register) and
// t + 2w + 1 (high half); a and b point at their superblock s.
template <int W>
struct PairSet {
  const uint8_t* a[W];
  const uint8_t* b[W];
};

// Σ q_w·q_x of one group of every pair for rows [i0, i0 + R) of x: xq
// points at the group's first quad of row i0 in x.quads (quad u of row
// i0 + r at xq[u · kQuadRows + r], so the R rows must lie in one block of
// kQuadRows: AllRows starts passes of R ≤ 4 rows at multiples of 4 and
// passes of 8 at multiples of 8); xsum[r] is Σ q_x of row i0 + r over the
// group. Each broadcast quad feeds W products, so that broadcasts, which
// take the vector ports vpdpbusd needs, cost less per product.
// Only the pairs of 32-byte records p in [P0, P1) (a range of the group's
// values: 8 per record of 4-bit values, 4 otherwise); a signed type's start
// is for the whole group.
template <int W, int R, typename F, int P0 = 0, int P1 = F::kGroup / (F::kNibbles ? 8 : 4)>
inline void RecordDots(const PairSet<W>& ps, int64_t offset, const int32_t* xq,
                       const int32_t* xsum, __m512i dot[W][R]) {
  static_assert(!F::kSigned || (P0 == 0 && P1 == F::kGroup / 4), "a signed start needs it all");
  // Few products: two accumulators each (even and odd quads, summed at the
  // end; integer sums are exact), so that vpdpbusd's latency overlaps.
  constexpr int kSplit = W * R <= 2 ? 2 : 1;
  __m512i part[kSplit][W][R];
  for (int r = 0; r < R; ++r) {
    const __m512i start = F::kSigned ? _mm512_set1_epi32(-128 * xsum[r]) : _mm512_setzero_si512();
    for (int w = 0; w < W; ++w) {
      part[0][w][r] = start;
      if constexpr (kSplit == 2) part[1][w][r] = _mm512_setzero_si512();
    }
  }
  if constexpr (F::kNibbles) {
    const __m512i low = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int p = P0; p < P1; ++p) {
      __m512i lo[W], hi[W];
      for (int w = 0; w < W; ++w) {
        const __m512i v = LoadPair(ps.a[w] + offset + 32 * p, ps.b[w] + offset + 32 * p);
        lo[w] = _mm512_and_si512(v, low);
        hi[w] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i xe = _mm512_set1_epi32(xq[(2 * p) * kQuadRows + r]);
        const __m512i xo = _mm512_set1_epi32(xq[(2 * p + 1) * kQuadRows + r]);
        for (int w = 0; w < W; ++w) {
          part[0][w][r] = _mm512_dpbusd_epi32(part[0][w][r], lo[w], xe);
          part[kSplit - 1][w][r] = _mm512_dpbusd_epi32(part[kSplit - 1][w][r], hi[w], xo);
        }
      }
    }
  } else {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int p = P0; p < P1; ++p) {
      __m512i v[W];
      for (int w = 0; w < W; ++w) {
        v[w] = LoadPair(ps.a[w] + offset + 32 * p, ps.b[w] + offset + 32 * p);
        if constexpr (F::kSigned) v[w] = _mm512_xor_si512(v[w], bias);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i xb = _mm512_set1_epi32(xq[p * kQuadRows + r]);
        for (int w = 0; w < W; ++w) {
          part[p % kSplit][w][r] = _mm512_dpbusd_epi32(part[p % kSplit][w][r], v[w], xb);
        }
      }
    }
  }
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) {
      dot[w][r] = kSplit == 2 ? _mm512_add_epi32(part[0][w][r], part[kSplit - 1][w][r])
                              : part[0][w][r];
    }
  }
}

// The float steps of one group (record at `offset` of the superblocks of
// ps) for the types with 32-value activation blocks: acc += float(dot)·(a·dx),
// then, for types with offsets, b·dsum (a = A, b = B·sb_const).
template <int W, int R, typename F>
inline void AddGroup(const PairSet<W>& ps, const QuantRecord& rec, const float* dx,
                     const float* dsum, const __m512i dot[W][R], __m512 acc[W][R]) {
  for (int w = 0; w < W; ++w) {
    const __m512 a = LoadHalvesPair(ps.a[w], ps.b[w]);
    for (int r = 0; r < R; ++r) {
      const __m512 step = _mm512_mul_ps(a, _mm512_set1_ps(dx[r]));
      acc[w][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[w][r]), step, acc[w][r]);
    }
    if constexpr (F::kHasB) {
      const __m512 b = _mm512_mul_ps(
          LoadHalvesPair(ps.a[w] + 2 * kQuantTileRows, ps.b[w] + 2 * kQuantTileRows),
          _mm512_set1_ps(rec.sb_const));
      for (int r = 0; r < R; ++r) {
        acc[w][r] = _mm512_fmadd_ps(b, _mm512_set1_ps(dsum[r]), acc[w][r]);
      }
    }
  }
}

// K types: ia += sa · dot for one group (record at `offset`), exact.
template <int W, int R>
inline void AddScaledDots(const PairSet<W>& ps, const QuantRecord& rec, int64_t offset,
                          const __m512i dot[W][R], __m512i ia[W][R]) {
  for (int w = 0; w < W; ++w) {
    const __m512i sa = _mm512_cvtepi8_epi32(
        LoadInts(ps.a[w] + offset + rec.value_bytes, ps.b[w] + offset + rec.value_bytes));
    for (int r = 0; r < R; ++r) {
      ia[w][r] = _mm512_add_epi32(ia[w][r], _mm512_mullo_epi32(dot[w][r], sa));
    }
  }
}

// Q4_K: ia += sa · dot for one group, in two halves of 16 values. A half's
// Σ q_w·q_x fits in 16 bits (|Σ| ≤ 16·15·128 < 2^15), so its int32 is its
// sign-extended low word, and sa (0..63) has a zero high word: one
// vpdpwssd (low words multiplied, high words 0·sign) multiplies and adds,
// in place of vpmulld (two operations) and an add. Exact, as before.
template <typename F>
constexpr bool kWordScaled = F::kNibbles && F::kPerGroupInts && !F::kSigned &&
                             F::kGroup == 32 && 16 * F::kMaxQ * 128 < 32768;

template <int W, int R, typename F>
inline void AddScaledHalves(const PairSet<W>& ps, const QuantRecord& rec, int64_t offset,
                            const int32_t* xq, __m512i ia[W][R]) {
  __m512i sa[W];
  for (int w = 0; w < W; ++w) {
    sa[w] = _mm512_cvtepi8_epi32(
        LoadInts(ps.a[w] + offset + rec.value_bytes, ps.b[w] + offset + rec.value_bytes));
  }
  __m512i half[W][R];
  RecordDots<W, R, F, 0, 2>(ps, offset, xq, nullptr, half);
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) ia[w][r] = _mm512_dpwssd_epi32(ia[w][r], half[w][r], sa[w]);
  }
  RecordDots<W, R, F, 2, 4>(ps, offset, xq, nullptr, half);
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) ia[w][r] = _mm512_dpwssd_epi32(ia[w][r], half[w][r], sa[w]);
  }
}

// K types with offsets: ib = Σ_g sb_g · Σ q_x over the superblock, two
// groups' offsets per vpmaddwd (int16 pairs per row) against the rows'
// paired sums xpair[h · n + r] (RowSteps::xpair).
template <int W, int R>
inline void OffsetSums(const PairSet<W>& ps, const QuantRecord& rec, const int32_t* xpair,
                       int64_t n, __m512i ib[W][R]) {
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) ib[w][r] = _mm512_setzero_si512();
  }
  for (int64_t h = 0; h < rec.groups_per_super / 2; ++h) {
    const int64_t even = rec.header_bytes + 2 * h * rec.bytes + rec.value_bytes + kQuantTileRows;
    const int64_t odd = even + rec.bytes;
    for (int w = 0; w < W; ++w) {
      const __m128i lo = _mm_unpacklo_epi8(Load8(ps.a[w] + even), Load8(ps.a[w] + odd));
      const __m128i hi = _mm_unpacklo_epi8(Load8(ps.b[w] + even), Load8(ps.b[w] + odd));
      const __m512i sb = _mm512_cvtepi8_epi16(
          _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
      for (int r = 0; r < R; ++r) {
        ib[w][r] = _mm512_add_epi32(ib[w][r],
                                    _mm512_madd_epi16(sb, _mm512_set1_epi32(xpair[h * n + r])));
      }
    }
  }
}

// K types: the float steps of superblock s (ps at it), from the integers.
template <int W, int R, typename F>
inline void AddSuper(const PairSet<W>& ps, const QuantRecord& rec, const RowSteps& steps,
                     int64_t n, int64_t i0, int64_t s, const __m512i ia[W][R], __m512 acc[W][R]) {
  __m512i ib[W][R];
  if constexpr (F::kHasB) {
    OffsetSums<W, R>(ps, rec, steps.xpair.data() + s * (rec.groups_per_super / 2) * n + i0, n, ib);
  }
  const float* dx = steps.dx.data() + s * rec.groups_per_super * n + i0;
  for (int w = 0; w < W; ++w) {
    const __m512 a = LoadHalvesPair(ps.a[w], ps.b[w]);
    const __m512 b = F::kHasB ? LoadHalvesPair(ps.a[w] + 2 * kQuantTileRows,
                                               ps.b[w] + 2 * kQuantTileRows)
                              : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const __m512 step = _mm512_mul_ps(a, _mm512_set1_ps(dx[r]));
      acc[w][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[w][r]), step, acc[w][r]);
      if constexpr (F::kHasB) {
        const __m512 bstep = _mm512_mul_ps(b, _mm512_set1_ps(dx[r]));
        acc[w][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[w][r]), bstep, acc[w][r]);
      }
    }
  }
}

// Rows [i0, i0 + R) of x against the W pairs of ps (at superblock 0);
// acc[w][r] gets row i0 + r's 16 outputs of pair w.
template <int W, int R, typename F>
void PairPass(PairSet<W> ps, const QuantRecord& rec, const QuantizedRows& x,
              const RowSteps& steps, int64_t i0, __m512 acc[W][R]) {
  const int64_t k = x.k, n = x.n, supers = k / F::kGroup / rec.groups_per_super;
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) acc[w][r] = _mm512_setzero_ps();
  }
  for (int64_t s = 0; s < supers; ++s) {
    __m512i ia[W][R];
    for (int w = 0; w < W; ++w) {
      for (int r = 0; r < R; ++r) ia[w][r] = _mm512_setzero_si512();
    }
    for (int64_t gg = 0; gg < rec.groups_per_super; ++gg) {
      const int64_t offset = rec.header_bytes + gg * rec.bytes;
      if constexpr (R == 1 || W * R <= 2) {
        // Few rows: streaming the weights is the bound; ask for the tiles'
        // bytes ahead (past a tile's end: the next tile, read next). One
        // row with three pairs too: on a Xeon with AMX, batch-1 steps of a
        // 1.1B Q4_K_M model (630 MB, more than the last-level cache) ran
        // 1.15x faster with it (BM_EngineStep/1/8, medians of 5).
        for (int64_t line = 0; line < rec.bytes; line += 64) {
          for (int w = 0; w < W; ++w) {
            _mm_prefetch(reinterpret_cast<const char*>(ps.a[w] + offset + kPrefetchBytes + line),
                         _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(ps.b[w] + offset + kPrefetchBytes + line),
                         _MM_HINT_T0);
          }
        }
      }
      const int64_t g = s * rec.groups_per_super + gg, first = g * F::kGroup;
      if constexpr (kWordScaled<F> && R > 1) {  // one row: latency-bound, as before
        AddScaledHalves<W, R, F>(ps, rec, offset, QuadsAt(x, i0, first / 4), ia);
        continue;
      }
      __m512i dot[W][R];
      RecordDots<W, R, F>(ps, offset, QuadsAt(x, i0, first / 4), steps.xsum.data() + g * n + i0,
                          dot);
      if constexpr (F::kPerGroupInts) {
        AddScaledDots<W, R>(ps, rec, offset, dot, ia);
      } else {
        AddGroup<W, R, F>(ps, rec, steps.dx.data() + g * n + i0, steps.dsum.data() + g * n + i0,
                          dot, acc);
      }
    }
    if constexpr (F::kPerGroupInts) AddSuper<W, R, F>(ps, rec, steps, n, i0, s, ia, acc);
    for (int w = 0; w < W; ++w) {
      ps.a[w] += rec.super_bytes;
      ps.b[w] += rec.super_bytes;
    }
  }
}

// Tiles [t, t + 2W) (or, for W = 1 and !pair, tile t alone) against rows
// [i, i + R) of x.
template <int W, int R, typename F>
inline void Rows(const PairSet<W>& ps, const QuantRecord& rec, const QuantizedRows& x,
                 const RowSteps& steps, int64_t i, int64_t t, bool pair, const Weight& w,
                 const float* bias, float* y) {
  __m512 acc[W][R];
  PairPass<W, R, F>(ps, rec, x, steps, i, acc);
  for (int p = 0; p < W; ++p) {
    for (int r = 0; r < R; ++r) StorePair(acc[p][r], i + r, t + 2 * p, pair, w, bias, y);
  }
}

// Every row of x, in passes of kRows, then of what is left.
template <int W, int kRows, typename F>
void AllRows(const PairSet<W>& ps, const QuantRecord& rec, const QuantizedRows& x,
             const RowSteps& steps, int64_t t, bool pair, const Weight& w, const float* bias,
             float* y) {
  int64_t i = 0;
  for (; i + kRows <= x.n; i += kRows) Rows<W, kRows, F>(ps, rec, x, steps, i, t, pair, w, bias, y);
  if constexpr (kRows > 4) {
    if (x.n - i >= 4) {
      Rows<W, 4, F>(ps, rec, x, steps, i, t, pair, w, bias, y);
      i += 4;
    }
  }
  switch (x.n - i) {
    case 3: Rows<W, 3, F>(ps, rec, x, steps, i, t, pair, w, bias, y); break;
    case 2: Rows<W, 2, F>(ps, rec, x, steps, i, t, pair, w, bias, y); break;
    case 1: Rows<W, 1, F>(ps, rec, x, steps, i, t, pair, w, bias, y); break;
    default: break;
  }
}

template <typename F>
void Run(const QuantizedRows& x, const Weight& w, const float* bias, float* y, int64_t t0,
         int64_t t1, const QuantRecord& rec) {
  const int64_t tile_bytes = QuantTileBytes(rec, w.cols);
  const RowSteps& steps = GatherRowSteps(x, F::kGroup);
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  int64_t t = t0;
  for (; t + 2 * kPairs <= t1; t += 2 * kPairs) {
    PairSet<kPairs> ps;
    for (int p = 0; p < kPairs; ++p) {
      ps.a[p] = base + (t + 2 * p) * tile_bytes;
      ps.b[p] = ps.a[p] + tile_bytes;
    }
    AllRows<kPairs, kRowsPerPass, F>(ps, rec, x, steps, t, true, w, bias, y);
  }
  for (; t < t1; t += 2) {
    // A last tile without a partner is computed twice (both halves) and
    // stored once.
    const bool pair = t + 1 < t1;
    PairSet<1> ps;
    ps.a[0] = base + t * tile_bytes;
    ps.b[0] = pair ? ps.a[0] + tile_bytes : ps.a[0];
    AllRows<1, 8, F>(ps, rec, x, steps, t, pair, w, bias, y);
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

TESSERA_ISA_END
