// AMX-INT8 kernel of Q6_K, built for AMX-TILE, AMX-INT8 and AVX-512: the
// same bits as QuantLinearPortable (quant_linear.h).
//
// As for Q4_K and Q5_K (quant_linear_k_amx.cc), a superblock's integer sum
// ia = Σ_g sa_g · Σ q_w·q_x adds its 16 groups in the tiles, with each
// group's scale folded into the weights. Q6_K's values q are signed, in
// [-32, 31], and its scales sa are int8, so sa is split in three digits:
//   sa = c0 + 8·c1 + 64·c2,  c0, c1 in [-3, 4],  c2 in [-2, 2]
// (c0 = ((sa + 3) mod 8) - 3, then the same for (sa - c0) / 8, and c2 what
// is left), which keeps every q·c in [-128, 124], a signed byte. Then
//   ia = C0 + 8·C1 + 64·C2,  Cj = Σ (q·cj)·q_x
// over the whole superblock, three tile products (TDPBSSD: signed by
// signed) of 64 inputs each per 64 inputs. The scaled values are built per
// pair of weight tiles (16 outputs) and superblock, for a chunk of rows: a
// 16-bit multiply by the digit gives the low byte of each 16-bit word exactly
// (mod 256), a second one of the word with its low byte cleared gives the
// high byte, and a byte blend takes one from each.
//
// Tiles: 0, A (up to 16 rows, from RowTilesOf); 1-3, the digits' B (16 × 64
// bytes); 4-6, their C. With three C tiles per block of rows, a second
// block would need nine tiles, so rows go one block of 16 at a time.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AMX)

#include "engine/backend/cpu/amx_tiles.h"
#include "engine/backend/cpu/quant_pairs_avx512.h"

namespace tessera::cpu {
namespace {

using namespace amx_int8;  // NOLINT(build/namespaces): the tile shapes
static_assert(kBlockRows == kRowTileRows && kTileInputs == kRowTileInputs);
constexpr int kGroup = 16;
constexpr int kGroupsPerSuper = kSuperInputs / kGroup;
constexpr int kDigits = 3;
constexpr int64_t kDigitBytes = kSuperInputs / 4 * kBRowBytes;  // one digit's B of a superblock
constexpr int64_t kSuperSplitBytes = kDigits * kDigitBytes;

void ConfigureTiles(int m) {
  TileConfig cfg;
  for (int t = 0; t <= kDigits * 2; ++t) {
    const int rows = t >= 1 && t <= kDigits ? kTileQuads : m;
    cfg.rows[t] = static_cast<uint8_t>(rows);
    cfg.colsb[t] = 64;
  }
  LoadTileConfig(cfg);
}

// ((v + 3) mod 8) - 3 in every 16-bit lane: a digit in [-3, 4].
inline __m512i LowDigit(__m512i v) {
  const __m512i three = _mm512_set1_epi16(3);
  return _mm512_sub_epi16(_mm512_and_si512(_mm512_add_epi16(v, three), _mm512_set1_epi16(7)),
                          three);
}

// The three digits of the 16 outputs' scales (int8 at sa_a, sa_b), each
// output's in both 16-bit halves of its 32-bit lane.
inline void ScaleDigits(const uint8_t* sa_a, const uint8_t* sa_b, __m512i digit[kDigits]) {
  const __m512i lanes = _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(Load8(sa_a), Load8(sa_b)));
  const __m512i sa = _mm512_or_si512(_mm512_and_si512(lanes, _mm512_set1_epi32(0xFFFF)),
                                     _mm512_slli_epi32(lanes, 16));
  digit[0] = LowDigit(sa);
  const __m512i rest = _mm512_srai_epi16(_mm512_sub_epi16(sa, digit[0]), 3);
  digit[1] = LowDigit(rest);
  digit[2] = _mm512_srai_epi16(_mm512_sub_epi16(rest, digit[1]), 3);
}

// q·c of every signed byte of v, with c the 16-bit lane's digit: exact, as
// every product is a signed byte.
inline __m512i ScaleBytes(__m512i v, __m512i c) {
  const __m512i high_bytes = _mm512_set1_epi16(static_cast<int16_t>(0xFF00));
  const __m512i lo = _mm512_mullo_epi16(v, c);
  const __m512i hi = _mm512_mullo_epi16(_mm512_and_si512(v, high_bytes), c);
  return _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, lo, hi);  // odd bytes from hi
}

// The digits' B of superblock s of the pair (ha, hb at its start) into out:
// [digit][64 quads][16 outputs × 4 bytes].
void BuildSplitB(const uint8_t* ha, const uint8_t* hb, const QuantRecord& rec, uint8_t* out) {
  for (int gg = 0; gg < kGroupsPerSuper; ++gg) {
    const int64_t off = rec.header_bytes + gg * rec.bytes;
    __m512i digit[kDigits];
    ScaleDigits(ha + off + rec.value_bytes, hb + off + rec.value_bytes, digit);
    uint8_t* o = out + gg * (kGroup / 4) * kBRowBytes;
    for (int u = 0; u < kGroup / 4; ++u) {
      const __m512i v = LoadPair(ha + off + 32 * u, hb + off + 32 * u);
      for (int d = 0; d < kDigits; ++d) {
        _mm512_storeu_si512(o + d * kDigitBytes + u * kBRowBytes, ScaleBytes(v, digit[d]));
      }
    }
  }
}

// C0, C1 and C2 of one superblock for a block of rows (its A tiles at xa,
// RowTilesOf; the digits' B at b), stored to c.
inline void SuperProducts(const int8_t* xa, const uint8_t* b, int32_t (*c)[kBlockRows * 16]) {
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  for (int q = 0; q < kSuperInputs / kTileInputs; ++q) {
    const uint8_t* bq = b + q * kTileQuads * kBRowBytes;
    _tile_loadd(0, xa + q * kBlockRows * kTileInputs, kTileInputs);
    _tile_loadd(1, bq, kBRowBytes);
    _tile_dpbssd(4, 0, 1);
    _tile_loadd(2, bq + kDigitBytes, kBRowBytes);
    _tile_dpbssd(5, 0, 2);
    _tile_loadd(3, bq + 2 * kDigitBytes, kBRowBytes);
    _tile_dpbssd(6, 0, 3);
  }
  _tile_stored(4, c[0], 64);
  _tile_stored(5, c[1], 64);
  _tile_stored(6, c[2], 64);
}

// The float steps of superblock s for rows [i0, i0 + M): ia = C0 + 8·C1 +
// 64·C2, then the portable kernel's acc = fma(float(ia), A·dx, acc).
template <int M>
inline void SuperSteps(const uint8_t* ha, const uint8_t* hb, const RowSteps& steps, int64_t n,
                       int64_t i0, int64_t s, const int32_t (*c)[kBlockRows * 16],
                       __m512 acc[M]) {
  const float* dx = steps.dx.data() + s * kGroupsPerSuper * n + i0;
  const __m512 a = LoadHalvesPair(ha, hb);
  for (int r = 0; r < M; ++r) {
    const __m512i c1 = _mm512_slli_epi32(_mm512_load_si512(c[1] + 16 * r), 3);
    const __m512i c2 = _mm512_slli_epi32(_mm512_load_si512(c[2] + 16 * r), 6);
    const __m512i ia = _mm512_add_epi32(_mm512_add_epi32(_mm512_load_si512(c[0] + 16 * r), c1), c2);
    const __m512 step = _mm512_mul_ps(a, _mm512_set1_ps(dx[r]));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), step, acc[r]);
  }
}

// Superblock s of the pair (tiles ta, tb; the digits' B of s at split)
// against rows [i0, i0 + m), m ≤ M ≤ 16, whose 16 float sums each are in
// sums (row i0 first); the steps of s add to them in place. Rows past m
// read stale products and padded steps, and are never stored.
template <int M>
void Block(const uint8_t* ta, const uint8_t* tb, const uint8_t* split, const QuantRecord& rec,
           const QuantizedRows& x, const int8_t* row_tiles, const RowSteps& steps, int64_t i0,
           int64_t s, int m, float* sums) {
  alignas(64) thread_local int32_t dots[kDigits][kBlockRows * 16] = {};
  __m512 acc[M];
  for (int r = 0; r < M; ++r) acc[r] = _mm512_load_ps(sums + 16 * r);
  SuperProducts(RowTileAt(row_tiles, x, i0, s * kSuperInputs), split, dots);
  SuperSteps<M>(ta + s * rec.super_bytes, tb + s * rec.super_bytes, steps, x.n, i0, s, dots, acc);
  for (int r = 0; r < m; ++r) _mm512_store_ps(sums + 16 * r, acc[r]);
}

// Rows in chunks of 64 (PairsBySuperblock, quant_pairs_avx512.h): a chunk's
// A tiles of a superblock (16 KB) stay in the L1 cache with a pair's digits
// (12 KB, built again for each chunk); the sums take 4 KB a pair. On the
// Xeon with AMX, BM_QuantKernel/7/2/{128,256}: 1.25x and 1.13x for
// 2048x768, 1.89x and 1.63x for 768x2048 (medians of 5).
constexpr int64_t kChunkRows = 64;

// Superblock s of the pair (tiles ta, tb; its digits at split) against rows
// [c0, c1), one block of 16 at a time; sums holds row c0's sums first.
void PairRows(const uint8_t* ta, const uint8_t* tb, const uint8_t* split, const QuantRecord& rec,
              const QuantizedRows& x, const int8_t* row_tiles, const RowSteps& steps, int64_t s,
              int64_t c0, int64_t c1, float* sums, int& configured) {
  for (int64_t i0 = c0; i0 < c1; i0 += kBlockRows) {
    const int m = static_cast<int>(std::min<int64_t>(kBlockRows, c1 - i0));
    if (m != configured) {
      ConfigureTiles(m);
      configured = m;
    }
    float* at = sums + 16 * (i0 - c0);
#define TESSERA_BLOCK(M) Block<M>(ta, tb, split, rec, x, row_tiles, steps, i0, s, m, at)
    switch ((m + 3) / 4) {
      case 4: TESSERA_BLOCK(16); break;
      case 3: TESSERA_BLOCK(12); break;
      case 2: TESSERA_BLOCK(8); break;
      default: TESSERA_BLOCK(4); break;
    }
#undef TESSERA_BLOCK
  }
}

}  // namespace

void QuantLinearAmxSplitScalesQ6K(const QuantizedRows& x, const Weight& w, const float* bias,
                                  float* y, int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  const int8_t* row_tiles = RowTilesOf(x);
  const RowSteps& steps = GatherRowSteps(x, kGroup);
  alignas(64) thread_local uint8_t split[kSuperSplitBytes];
  int configured = -1;
  PairsBySuperblock(x, w, rec, bias, y, tile_begin, tile_end, kChunkRows, kBlockRows,
                    [&](const uint8_t* ta, const uint8_t* tb, int64_t s, int64_t c0, int64_t c1,
                        float* sums) {
                      BuildSplitB(ta + s * rec.super_bytes, tb + s * rec.super_bytes, rec, split);
                      PairRows(ta, tb, split, rec, x, row_tiles, steps, s, c0, c1, sums,
                               configured);
                    });
  _tile_release();
}

}  // namespace tessera::cpu

TESSERA_ISA_END
