// AMX-INT8 kernel of the K types with unsigned values and offsets (Q4_K,
// Q5_K), built for AMX-TILE, AMX-INT8 and AVX-512: the same bits as
// QuantLinearPortable (quant_linear.h).
//
// A superblock's integer sum ia = Σ_g sa_g · Σ q_w·q_x needs each group's
// dot product scaled by its own 6-bit sa before the groups add. Split
// sa = 8·hi + lo with lo, hi in [0, 7]: then q·lo and q·hi (q ≤ 31) are
// bytes, and
//   ia = C' + 8·C'',  C' = Σ (q·lo)·q_x,  C'' = Σ (q·hi)·q_x
// over the whole superblock. Both are plain tile products that accumulate
// in the tiles, four of 64 inputs per superblock, with no vector step
// between groups. The scaled values, B' = q·lo and B'' = q·hi, are built
// once per pair of weight tiles (16 outputs), for every block of rows:
// a 16-bit multiply of a register of quads by each output's scale in both
// halves of its 32-bit lane gives both bytes of a half exactly, as
// neither product carries past its byte.
//
// Per superblock and block of up to 16 rows the vector steps are then
// ia = C' + (C'' << 3), the offsets' sums ib = Σ_g sb_g·Σ q_x (vpmaddwd
// over two groups against RowSteps::xpair), and the portable kernel's
// float steps. Rows go two blocks at a time (32), so that each B tile
// loaded feeds two products and four chains of products run at once. The
// A tiles come packed, each 1 KB in one run (RowTilesOf), rather than as
// 16 rows k bytes apart: with k = 2048 those rows fall in two sets of the
// L1 cache.
//
// The tiles run short of their peak here: a tile product of 16 cycles
// needs 1 KB of A or B, which L2 does not deliver that fast (a kernel of
// this shape with no vector steps reached about a quarter of the rate it
// has with both operands in L1; hence the chunks of rows of Run, whose
// operands stay in L1), and building B' and B'' and the vector steps cost
// as much again. Still, from 12 rows on it beats the AVX512-VNNI kernel
// (quant_linear_amx.cc), decode steps of many sequences included.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AMX)

#include "engine/backend/cpu/amx_tiles.h"
#include "engine/backend/cpu/quant_pairs_avx512.h"

namespace tessera::cpu {
namespace {

using namespace amx_int8;  // NOLINT(build/namespaces): the tile shapes
static_assert(kBlockRows == kRowTileRows && kTileInputs == kRowTileInputs);
constexpr int kSuperQuads = kSuperInputs / 4;
constexpr int64_t kHalfBytes = kSuperQuads * kBRowBytes;  // B' (or B'') of a superblock
constexpr int kGroupsPerSuper = 8;

// Tiles 0, 1: A of the first block (m0 rows) and of the second (m1, 0 when
// there is none); 2, 3: B' and B'' (16 × 64 bytes); 4, 5: C' and C'' of the
// first block (m0 × 16 int32); 6, 7: of the second.
void ConfigureTiles(int m0, int m1) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    const int rows = t == 2 || t == 3 ? kTileQuads : (t == 1 || t >= 6) ? m1 : m0;
    cfg.rows[t] = static_cast<uint8_t>(rows);
    cfg.colsb[t] = rows > 0 ? 64 : 0;
  }
  LoadTileConfig(cfg);
}

// Each output's scale (a 32-bit lane) in both 16-bit halves.
inline __m512i BothHalves(__m512i lanes) {
  return _mm512_or_si512(lanes, _mm512_slli_epi32(lanes, 16));
}

// B' and B'' of superblock s of the pair (ha, hb at its start) into out:
// [B', B''][64 quads][16 outputs × 4 bytes].
template <typename F>
void BuildSplitB(const uint8_t* ha, const uint8_t* hb, const QuantRecord& rec, uint8_t* out) {
  const __m512i seven = _mm512_set1_epi32(7), nibble = _mm512_set1_epi8(0x0F);
  for (int gg = 0; gg < kGroupsPerSuper; ++gg) {
    const int64_t off = rec.header_bytes + gg * rec.bytes;
    const __m512i sa = _mm512_cvtepu8_epi32(
        _mm_unpacklo_epi64(Load8(ha + off + rec.value_bytes), Load8(hb + off + rec.value_bytes)));
    const __m512i lo = BothHalves(_mm512_and_si512(sa, seven));
    const __m512i hi = BothHalves(_mm512_and_si512(_mm512_srli_epi32(sa, 3), seven));
    uint8_t* o = out + gg * (F::kGroup / 4) * kBRowBytes;
    auto put = [&](int u, __m512i v) {
      _mm512_storeu_si512(o + u * kBRowBytes, _mm512_mullo_epi16(v, lo));
      _mm512_storeu_si512(o + kHalfBytes + u * kBRowBytes, _mm512_mullo_epi16(v, hi));
    };
    if constexpr (F::kNibbles) {
      // Block q (32 bytes) of a record holds quad 2q in its low nibbles and
      // quad 2q + 1 in its high ones.
      for (int q = 0; q < F::kGroup / 8; ++q) {
        const __m512i w = LoadPair(ha + off + 32 * q, hb + off + 32 * q);
        put(2 * q, _mm512_and_si512(w, nibble));
        put(2 * q + 1, _mm512_and_si512(_mm512_srli_epi16(w, 4), nibble));
      }
    } else {
      for (int u = 0; u < F::kGroup / 4; ++u) {
        put(u, LoadPair(ha + off + 32 * u, hb + off + 32 * u));
      }
    }
  }
}

// C' and C'' of one superblock for kBlocks blocks of rows (their A tiles
// at xa0 and xa1, RowTilesOf; B' and B'' at b), stored to c[block][0 or 1].
// With two blocks each B load feeds two products, and four chains of
// products run at once.
template <int kBlocks>
inline void SuperProducts(const int8_t* xa0, const int8_t* xa1, const uint8_t* b,
                          int32_t (*c)[2][kBlockRows * 16]) {
  _tile_zero(4);
  _tile_zero(5);
  if constexpr (kBlocks == 2) {
    _tile_zero(6);
    _tile_zero(7);
  }
  for (int q = 0; q < kSuperInputs / kTileInputs; ++q) {
    _tile_loadd(2, b + q * kTileQuads * kBRowBytes, kBRowBytes);
    _tile_loadd(0, xa0 + q * kBlockRows * kTileInputs, kTileInputs);
    _tile_dpbsud(4, 0, 2);
    if constexpr (kBlocks == 2) {
      _tile_loadd(1, xa1 + q * kBlockRows * kTileInputs, kTileInputs);
      _tile_dpbsud(6, 1, 2);
    }
    _tile_loadd(3, b + kHalfBytes + q * kTileQuads * kBRowBytes, kBRowBytes);
    _tile_dpbsud(5, 0, 3);
    if constexpr (kBlocks == 2) _tile_dpbsud(7, 1, 3);
  }
  _tile_stored(4, c[0][0], 64);
  _tile_stored(5, c[0][1], 64);
  if constexpr (kBlocks == 2) {
    _tile_stored(6, c[1][0], 64);
    _tile_stored(7, c[1][1], 64);
  }
}

// The float steps of superblock s for rows [i0, i0 + M) from its C' and C''
// (c1, c2); ha and hb point at the pair's superblock.
template <int M, typename F>
inline void SuperSteps(const uint8_t* ha, const uint8_t* hb, const QuantRecord& rec,
                       const RowSteps& steps, int64_t n, int64_t i0, int64_t s, const int32_t* c1,
                       const int32_t* c2, __m512 acc[M]) {
  constexpr int kHalves = kGroupsPerSuper / 2;
  const float* dx = steps.dx.data() + s * kGroupsPerSuper * n + i0;
  const int32_t* xpair = steps.xpair.data() + s * kHalves * n + i0;
  __m512i sb[kHalves];
  for (int h = 0; h < kHalves; ++h) {
    const int64_t even = rec.header_bytes + 2 * h * rec.bytes + rec.value_bytes + kQuantTileRows;
    const int64_t odd = even + rec.bytes;
    const __m128i lo = _mm_unpacklo_epi8(Load8(ha + even), Load8(ha + odd));
    const __m128i hi = _mm_unpacklo_epi8(Load8(hb + even), Load8(hb + odd));
    sb[h] = _mm512_cvtepi8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
  const __m512 a = LoadHalvesPair(ha, hb);
  const __m512 b = LoadHalvesPair(ha + 2 * kQuantTileRows, hb + 2 * kQuantTileRows);
  for (int r = 0; r < M; ++r) {
    const __m512i ia = _mm512_add_epi32(_mm512_load_si512(c1 + 16 * r),
                                        _mm512_slli_epi32(_mm512_load_si512(c2 + 16 * r), 3));
    __m512i ib = _mm512_setzero_si512();
    for (int h = 0; h < kHalves; ++h) {
      ib = _mm512_add_epi32(ib, _mm512_madd_epi16(sb[h], _mm512_set1_epi32(xpair[h * n + r])));
    }
    const __m512 step = _mm512_mul_ps(a, _mm512_set1_ps(dx[r]));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), step, acc[r]);
    const __m512 bstep = _mm512_mul_ps(b, _mm512_set1_ps(dx[r]));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib), bstep, acc[r]);
  }
}

// Superblock s of the pair (tiles ta, tb; B' and B'' of s at split) against
// rows [i0, i0 + m0 + m1), whose A tiles are in row_tiles (RowTilesOf): a
// block of m0 ≤ M0 ≤ 16 rows and, when M1 > 0, a second of m1 ≤ M1 ≤ 16
// (then m0 = 16). sums holds the rows' 16 float sums each (row i0 first),
// which the float steps of s add to in place.
template <int M0, int M1, typename F>
void Blocks(const uint8_t* ta, const uint8_t* tb, const uint8_t* split, const QuantRecord& rec,
            const QuantizedRows& x, const int8_t* row_tiles, const RowSteps& steps, int64_t i0,
            int64_t s, int m0, int m1, float* sums) {
  alignas(64) thread_local int32_t dots[2][2][kBlockRows * 16] = {};
  SuperProducts<(M1 > 0 ? 2 : 1)>(RowTileAt(row_tiles, x, i0, s * kSuperInputs),
                                  RowTileAt(row_tiles, x, i0 + M0, s * kSuperInputs), split,
                                  dots);
  const uint8_t* ha = ta + s * rec.super_bytes;
  const uint8_t* hb = tb + s * rec.super_bytes;
  __m512 acc0[M0], acc1[M1 > 0 ? M1 : 1];
  for (int r = 0; r < M0; ++r) acc0[r] = _mm512_load_ps(sums + 16 * r);
  SuperSteps<M0, F>(ha, hb, rec, steps, x.n, i0, s, dots[0][0], dots[0][1], acc0);
  for (int r = 0; r < m0; ++r) _mm512_store_ps(sums + 16 * r, acc0[r]);
  if constexpr (M1 > 0) {
    for (int r = 0; r < M1; ++r) acc1[r] = _mm512_load_ps(sums + 16 * (M0 + r));
    SuperSteps<M1, F>(ha, hb, rec, steps, x.n, i0 + M0, s, dots[1][0], dots[1][1], acc1);
    for (int r = 0; r < m1; ++r) _mm512_store_ps(sums + 16 * (M0 + r), acc1[r]);
  }
}

// Superblock s of the pair (tiles ta and tb, B' and B'' of s at split)
// against rows [c0, c1) of x: two blocks of 16 rows at a time, then a lone
// block of what is left. sums holds row c0's 16 sums first. `configured` is
// the (m0, m1) of the tile configuration loaded.
template <typename F>
void PairRows(const uint8_t* ta, const uint8_t* tb, const uint8_t* split, const QuantRecord& rec,
              const QuantizedRows& x, const int8_t* row_tiles, const RowSteps& steps, int64_t s,
              int64_t c0, int64_t c1, float* sums, std::pair<int, int>& configured) {
  for (int64_t i0 = c0; i0 < c1; i0 += 2 * kBlockRows) {
    const int m0 = static_cast<int>(std::min<int64_t>(kBlockRows, c1 - i0));
    const int m1 = static_cast<int>(std::min<int64_t>(kBlockRows, c1 - i0 - m0));
    if (std::pair{m0, m1} != configured) {
      ConfigureTiles(m0, m1);
      configured = {m0, m1};
    }
    float* at = sums + 16 * (i0 - c0);
#define TESSERA_BLOCKS(M0, M1) \
  Blocks<M0, M1, F>(ta, tb, split, rec, x, row_tiles, steps, i0, s, m0, m1, at)
    switch (m1 > 0 ? 4 + (m1 + 3) / 4 : (m0 + 3) / 4) {
      case 8: TESSERA_BLOCKS(16, 16); break;
      case 7: TESSERA_BLOCKS(16, 12); break;
      case 6: TESSERA_BLOCKS(16, 8); break;
      case 5: TESSERA_BLOCKS(16, 4); break;
      case 4: TESSERA_BLOCKS(16, 0); break;
      case 3: TESSERA_BLOCKS(12, 0); break;
      case 2: TESSERA_BLOCKS(8, 0); break;
      default: TESSERA_BLOCKS(4, 0); break;
    }
#undef TESSERA_BLOCKS
  }
}

// Rows in chunks of 32 (PairsBySuperblock, quant_pairs_avx512.h): a chunk's
// A tiles of a superblock (8 KB) stay in the L1 cache with a pair's B' and
// B'' (8 KB, built again for each chunk); the sums take 2 KB a pair. Going
// pair by pair over all superblocks instead read every A tile from L2 once
// per pair. On the Xeon with AMX, BM_Prefill/512 of the 110M Q4_K_M model
// 1.05x (medians of 6); BM_QuantKernel/7/0/256 1.2x for 2048x768 and
// 768x2048, /128 0.92x and 1.38x (medians of 5).
constexpr int64_t kChunkRows = 32;

template <typename F>
void Run(const QuantizedRows& x, const Weight& w, const float* bias, float* y, int64_t t0,
         int64_t t1, const QuantRecord& rec) {
  alignas(64) thread_local uint8_t split[2 * kHalfBytes];
  const int8_t* row_tiles = RowTilesOf(x);
  const RowSteps& steps = GatherRowSteps(x, F::kGroup);
  std::pair<int, int> configured{-1, -1};
  PairsBySuperblock(x, w, rec, bias, y, t0, t1, kChunkRows, kBlockRows,
                    [&](const uint8_t* ta, const uint8_t* tb, int64_t s, int64_t c0, int64_t c1,
                        float* sums) {
                      BuildSplitB<F>(ta + s * rec.super_bytes, tb + s * rec.super_bytes, rec,
                                     split);
                      PairRows<F>(ta, tb, split, rec, x, row_tiles, steps, s, c0, c1, sums,
                                  configured);
                    });
  _tile_release();
}

}  // namespace

// The forms this kernel computes (Q4_K and Q5_K): unsigned values in
// groups of 32 with integer scales and offsets per group.
template <typename F>
constexpr bool kSplitScalesForm =
    F::kPerGroupInts && F::kHasB && !F::kSigned && F::kGroup == 32;
// The form of quant_linear_q6k_amx.cc (Q6_K): signed values in groups of 16
// with int8 scales and no offsets, three digits a scale.
template <typename F>
constexpr bool kThreeDigitForm = F::kPerGroupInts && !F::kHasB && F::kSigned && F::kGroup == 16;

bool AmxSplitScalesApply(DType dtype) {
  bool apply = false;
  VisitQuantForm(dtype, [&](auto form) {
    using F = decltype(form);
    apply = kSplitScalesForm<F> || kThreeDigitForm<F>;
  });
  return apply;
}

void QuantLinearAmxSplitScales(const QuantizedRows& x, const Weight& w, const float* bias,
                               float* y, int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  VisitQuantForm(w.dtype, [&](auto form) {
    using F = decltype(form);
    if constexpr (kThreeDigitForm<F>) {
      QuantLinearAmxSplitScalesQ6K(x, w, bias, y, tile_begin, tile_end);
    } else if constexpr (kSplitScalesForm<F>) {
      Run<F>(x, w, bias, y, tile_begin, tile_end, rec);
    }
  });
}

}  // namespace tessera::cpu

TESSERA_ISA_END
