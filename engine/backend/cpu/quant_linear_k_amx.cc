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
// loaded feeds two products and four chains of products run at once; a
// last lone block issues superblock s + 1's products before the vector
// steps of s and stores them after.
//
// The tiles run short of their peak here: a tile product of 16 cycles
// needs 1 KB of A or B, which L2 does not deliver that fast (a kernel of
// this shape with no vector steps reached about a quarter of the rate it
// has with both operands in L1), and the vector steps cost as much again.
// So QuantLinearAmx runs it only for many rows (prefill), where the
// AVX512-VNNI kernel is slower per row than in decode.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AMX)

#include "engine/backend/cpu/amx_tiles.h"
#include "engine/backend/cpu/quant_pairs_avx512.h"

namespace tessera::cpu {
namespace {

constexpr int kBlockRows = 16;           // activation rows per tile product
constexpr int kBRowBytes = 64;           // 16 outputs × 4 inputs
constexpr int kSuperInputs = 256;
constexpr int kTileInputs = 64;          // inputs per tile product
constexpr int kTileQuads = kTileInputs / 4;
constexpr int kSuperQuads = kSuperInputs / 4;
constexpr int64_t kHalfBytes = kSuperQuads * kBRowBytes;  // B' (or B'') of a superblock
constexpr int kGroupsPerSuper = 8;

// Tile 0: A (m × 64 bytes); 1, 2: B' and B'' (16 × 64 bytes); 3, 4: C' and
// C'' of even superblocks (m × 16 int32); 5, 6: those of odd superblocks.
void ConfigureTiles(int m) {
  TileConfig cfg;
  for (int t = 0; t < 7; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(t == 1 || t == 2 ? kTileQuads : m);
    cfg.colsb[t] = 64;
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

// C' and C'' of one superblock: A at xa (stride k), B' and B'' at b, into
// the superblock's set of C tiles (`odd` picks it: the intrinsics take tile
// numbers as literal tokens).
inline void SuperProducts(bool odd, const int8_t* xa, int64_t k, const uint8_t* b) {
#define TESSERA_SUPER_TILES(C1, C2)                                     \
  do {                                                                  \
    _tile_zero(C1);                                                     \
    _tile_zero(C2);                                                     \
    for (int q = 0; q < kSuperInputs / kTileInputs; ++q) {              \
      _tile_loadd(0, xa + q * kTileInputs, k);                          \
      _tile_loadd(1, b + q * kTileQuads * kBRowBytes, kBRowBytes);      \
      _tile_dpbsud(C1, 0, 1);                                           \
      _tile_loadd(2, b + kHalfBytes + q * kTileQuads * kBRowBytes, kBRowBytes); \
      _tile_dpbsud(C2, 0, 2);                                           \
    }                                                                   \
  } while (0)
  if (odd) {
    TESSERA_SUPER_TILES(5, 6);
  } else {
    TESSERA_SUPER_TILES(3, 4);
  }
#undef TESSERA_SUPER_TILES
}

// Two blocks of rows (16 and m1) at once: tiles 0, 1: their A; 2, 3: B'
// and B''; 4, 5: C' and C'' of the first block; 6, 7: of the second. Each
// B load feeds two products, and four chains of products run at once.
void ConfigureTwoBlocks(int m1) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(t == 2 || t == 3 ? kTileQuads
                                       : (t == 1 || t >= 6) ? m1 : kBlockRows);
    cfg.colsb[t] = 64;
  }
  LoadTileConfig(cfg);
}

// C' and C'' of one superblock for both blocks (A at xa0 and xa1, stride
// k; B' and B'' at b), stored to c[block][0 or 1].
inline void TwoBlockProducts(const int8_t* xa0, const int8_t* xa1, int64_t k, const uint8_t* b,
                             int32_t (*c)[2][kBlockRows * 16]) {
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int q = 0; q < kSuperInputs / kTileInputs; ++q) {
    _tile_loadd(2, b + q * kTileQuads * kBRowBytes, kBRowBytes);
    _tile_loadd(0, xa0 + q * kTileInputs, k);
    _tile_dpbsud(4, 0, 2);
    _tile_loadd(1, xa1 + q * kTileInputs, k);
    _tile_dpbsud(6, 1, 2);
    _tile_loadd(3, b + kHalfBytes + q * kTileQuads * kBRowBytes, kBRowBytes);
    _tile_dpbsud(5, 0, 3);
    _tile_dpbsud(7, 1, 3);
  }
  _tile_stored(4, c[0][0], 64);
  _tile_stored(5, c[0][1], 64);
  _tile_stored(6, c[1][0], 64);
  _tile_stored(7, c[1][1], 64);
}

// Stores a superblock's C' and C'' (row r's 16 products at 16r of each).
inline void StoreProducts(bool odd, int32_t* c1, int32_t* c2) {
  if (odd) {
    _tile_stored(5, c1, 64);
    _tile_stored(6, c2, 64);
  } else {
    _tile_stored(3, c1, 64);
    _tile_stored(4, c2, 64);
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

// The pair (tiles ta, tb, with their B' and B'' at split) against rows
// [i0, i0 + m), m ≤ M ≤ 16: acc[r] gets row i0 + r's 16 outputs.
template <int M, typename F>
void BlockPass(const uint8_t* ta, const uint8_t* tb, const uint8_t* split, const QuantRecord& rec,
               const QuantizedRows& x, int64_t i0, const RowSteps& steps, __m512 acc[M]) {
  alignas(64) thread_local int32_t dots[2][2][kBlockRows * 16] = {};
  const int64_t supers = x.k / kSuperInputs;
  const int8_t* xa = x.q.data() + i0 * x.k;
  for (int r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps();
  SuperProducts(false, xa, x.k, split);
  StoreProducts(false, dots[0][0], dots[0][1]);
  for (int64_t s = 0; s < supers; ++s) {
    const int64_t next = s + 1;
    if (next < supers) {
      SuperProducts(next & 1, xa + next * kSuperInputs, x.k, split + next * 2 * kHalfBytes);
    }
    SuperSteps<M, F>(ta + s * rec.super_bytes, tb + s * rec.super_bytes, rec, steps, x.n, i0, s,
                     dots[s & 1][0], dots[s & 1][1], acc);
    if (next < supers) StoreProducts(next & 1, dots[next & 1][0], dots[next & 1][1]);
  }
}

// The pair against rows [i0, i0 + 16 + m1): acc0 gets the first 16 rows'
// outputs, acc1 the next m1 (m1 ≤ M1 ≤ 16).
template <int M1, typename F>
void TwoBlockPass(const uint8_t* ta, const uint8_t* tb, const uint8_t* split,
                  const QuantRecord& rec, const QuantizedRows& x, int64_t i0,
                  const RowSteps& steps, __m512 acc0[kBlockRows], __m512 acc1[M1]) {
  alignas(64) thread_local int32_t dots[2][2][kBlockRows * 16] = {};
  const int64_t supers = x.k / kSuperInputs;
  const int8_t* xa = x.q.data() + i0 * x.k;
  for (int r = 0; r < kBlockRows; ++r) acc0[r] = _mm512_setzero_ps();
  for (int r = 0; r < M1; ++r) acc1[r] = _mm512_setzero_ps();
  for (int64_t s = 0; s < supers; ++s) {
    TwoBlockProducts(xa + s * kSuperInputs, xa + kBlockRows * x.k + s * kSuperInputs, x.k,
                     split + s * 2 * kHalfBytes, dots);
    const uint8_t* ha = ta + s * rec.super_bytes;
    const uint8_t* hb = tb + s * rec.super_bytes;
    SuperSteps<kBlockRows, F>(ha, hb, rec, steps, x.n, i0, s, dots[0][0], dots[0][1], acc0);
    SuperSteps<M1, F>(ha, hb, rec, steps, x.n, i0 + kBlockRows, s, dots[1][0], dots[1][1],
                      acc1);
  }
}

template <int M, typename F>
inline void Block(const uint8_t* ta, const uint8_t* tb, const uint8_t* split,
                  const QuantRecord& rec, const QuantizedRows& x, const RowSteps& steps,
                  int64_t i0, int m, int64_t t, bool pair, const Weight& w, const float* bias,
                  float* y) {
  __m512 acc[M];
  BlockPass<M, F>(ta, tb, split, rec, x, i0, steps, acc);
  for (int r = 0; r < m; ++r) StorePair(acc[r], i0 + r, t, pair, w, bias, y);
}

template <int M1, typename F>
inline void TwoBlocks(const uint8_t* ta, const uint8_t* tb, const uint8_t* split,
                      const QuantRecord& rec, const QuantizedRows& x, const RowSteps& steps,
                      int64_t i0, int m1, int64_t t, bool pair, const Weight& w,
                      const float* bias, float* y) {
  __m512 acc0[kBlockRows], acc1[M1];
  TwoBlockPass<M1, F>(ta, tb, split, rec, x, i0, steps, acc0, acc1);
  for (int r = 0; r < kBlockRows; ++r) StorePair(acc0[r], i0 + r, t, pair, w, bias, y);
  for (int r = 0; r < m1; ++r) StorePair(acc1[r], i0 + kBlockRows + r, t, pair, w, bias, y);
}

// Tile configurations loaded by PairRows: m for a lone block of m rows,
// kTwoBlockConfigs + m1 for two blocks, the second of m1 rows.
constexpr int kTwoBlockConfigs = 100;

// Every row of x against the pair (tiles ta and tb, B' and B'' at split):
// two blocks of 16 rows at a time, then a lone block of what is left.
template <typename F>
void PairRows(const uint8_t* ta, const uint8_t* tb, const uint8_t* split, const QuantRecord& rec,
              const QuantizedRows& x, const RowSteps& steps, int64_t t, bool pair,
              const Weight& w, const float* bias, float* y, int& configured) {
  int64_t i0 = 0;
  for (; i0 + kBlockRows < x.n; i0 += 2 * kBlockRows) {
    const int m1 = static_cast<int>(std::min<int64_t>(kBlockRows, x.n - i0 - kBlockRows));
    if (kTwoBlockConfigs + m1 != configured) {
      ConfigureTwoBlocks(m1);
      configured = kTwoBlockConfigs + m1;
    }
    switch ((m1 + 3) / 4) {
      case 4: TwoBlocks<16, F>(ta, tb, split, rec, x, steps, i0, m1, t, pair, w, bias, y); break;
      case 3: TwoBlocks<12, F>(ta, tb, split, rec, x, steps, i0, m1, t, pair, w, bias, y); break;
      case 2: TwoBlocks<8, F>(ta, tb, split, rec, x, steps, i0, m1, t, pair, w, bias, y); break;
      default: TwoBlocks<4, F>(ta, tb, split, rec, x, steps, i0, m1, t, pair, w, bias, y); break;
    }
  }
  if (i0 >= x.n) return;
  const int m = static_cast<int>(x.n - i0);
  if (m != configured) {
    ConfigureTiles(m);
    configured = m;
  }
  switch ((m + 3) / 4) {
    case 4: Block<16, F>(ta, tb, split, rec, x, steps, i0, m, t, pair, w, bias, y); break;
    case 3: Block<12, F>(ta, tb, split, rec, x, steps, i0, m, t, pair, w, bias, y); break;
    case 2: Block<8, F>(ta, tb, split, rec, x, steps, i0, m, t, pair, w, bias, y); break;
    default: Block<4, F>(ta, tb, split, rec, x, steps, i0, m, t, pair, w, bias, y); break;
  }
}

template <typename F>
void Run(const QuantizedRows& x, const Weight& w, const float* bias, float* y, int64_t t0,
         int64_t t1, const QuantRecord& rec) {
  thread_local std::vector<uint8_t> scratch;
  const RowSteps& steps = GatherRowSteps(x, F::kGroup);
  const int64_t tile_bytes = QuantTileBytes(rec, w.cols), supers = w.cols / kSuperInputs;
  if (scratch.size() < static_cast<size_t>(supers * 2 * kHalfBytes)) {
    scratch.resize(static_cast<size_t>(supers * 2 * kHalfBytes));
  }
  int configured = -1;
  for (int64_t t = t0; t < t1; t += 2) {
    // A last tile without a partner is computed twice and stored once.
    const bool pair = t + 1 < t1;
    const uint8_t* ta = static_cast<const uint8_t*>(w.data) + t * tile_bytes;
    const uint8_t* tb = pair ? ta + tile_bytes : ta;
    for (int64_t s = 0; s < supers; ++s) {
      BuildSplitB<F>(ta + s * rec.super_bytes, tb + s * rec.super_bytes, rec,
                     scratch.data() + s * 2 * kHalfBytes);
    }
    PairRows<F>(ta, tb, scratch.data(), rec, x, steps, t, pair, w, bias, y, configured);
  }
  _tile_release();
}

}  // namespace

bool AmxSplitScalesApply(DType dtype) { return dtype == DType::kQ4_K || dtype == DType::kQ5_K; }

void QuantLinearAmxSplitScales(const QuantizedRows& x, const Weight& w, const float* bias,
                               float* y, int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  VisitQuantForm(w.dtype, [&](auto form) {
    using F = decltype(form);
    if constexpr (F::kPerGroupInts && F::kHasB && !F::kSigned && F::kGroup == 32) {
      Run<F>(x, w, bias, y, tile_begin, tile_end, rec);
    }
  });
}

}  // namespace tessera::cpu

TESSERA_ISA_END
