// AMX-INT8 twin of QuantLinearPortable (quant_linear.h), built for
// AMX-TILE, AMX-INT8 and AVX-512, and chosen at level amx when the CPU
// has AMX-INT8.
//
// Weight tiles go in pairs (16 outputs). For each group of G inputs (32, or
// 16 for Q6_K) one tile product gives the exact integer dot products of up
// to 16 activation rows with the pair's 16 outputs:
//   A  the rows' G activation bytes (x.q, stride k): m × G int8;
//   B  G/4 rows of 16 outputs × 4 inputs: row u is quad u of the first
//      tile's record (32 bytes, as the packing lays it out) then the second
//      tile's, with 4-bit values unpacked to one byte each, built once per
//      pair into a scratch that every block of rows reuses;
//   C  m × 16 int32, stored to memory for the float steps.
// Signed activations multiply unsigned values with TDPBSUD and signed ones
// (Q8_0, Q6_K) with TDPBSSD, so no bias is needed (Q4_0 and Q5_0, whose
// values are taken less a zero, and the IQ4 types run the AVX512-VNNI
// kernel). The float steps are the
// portable kernel's, lane by lane, so the outputs have its bits.
//
// The K types, whose superblocks add their groups in integers before any
// float step, run quant_linear_k_amx.cc (Q4_K, Q5_K) or
// quant_linear_q6k_amx.cc (Q6_K).
//
// QuantLinearAmx runs the tiles only where they measure faster than the
// AVX512-VNNI kernel (the same bits): from kMinAmxRows rows up, for Q8_0
// here and for the K types in quant_linear_k_amx.cc and
// quant_linear_q6k_amx.cc (tessera-microbench
// --benchmark_filter='QuantKernel/(4|7)/', one thread, 2048x768 and
// 768x2048: at 16 rows Q8_0 about 1.3x, Q4_K 1.5-1.8x, Q5_K 1.45-1.5x,
// Q6_K 1.2-1.45x; at 12 rows Q4_K and Q5_K 1.2-1.35x, Q6_K a toss-up; at
// 8 rows a toss-up for Q4_K, slower for the others). Types with offsets pay a
// second float step per group here; with it these tiles measured no faster
// for Q4_K and Q5_K, so only Q8_0 runs on them.
// Rows past the last of a block read other rows' steps (GatherRowSteps
// pads its arrays) and stale products, and are never stored.
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

constexpr int64_t kMinAmxRows = 12;
constexpr int kBlockRows = 16;  // activation rows per tile product
constexpr int kBRowBytes = 64;  // 16 outputs × 4 inputs
constexpr int kChunkGroups = 4;  // tile products stored before their float steps

// Tiles 0-3: C of kChunkGroups groups (m × 16 int32); 4: A (m × G bytes);
// 5, 6: B (G/4 × 64 bytes).
void ConfigureTiles(int m, int group) {
  TileConfig cfg;
  for (int t = 0; t < kChunkGroups; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(m);
    cfg.colsb[t] = 64;
  }
  cfg.rows[4] = static_cast<uint8_t>(m);
  cfg.colsb[4] = static_cast<uint16_t>(group);
  for (int t : {5, 6}) {
    cfg.rows[t] = static_cast<uint8_t>(group / 4);
    cfg.colsb[t] = kBRowBytes;
  }
  LoadTileConfig(cfg);
}

// The B operand of group g's records ra and rb (G/4 rows of 64 bytes).
template <typename F>
inline void BuildB(const uint8_t* ra, const uint8_t* rb, uint8_t* out) {
  if constexpr (F::kNibbles) {
    // Block p (32 bytes) of a record holds quad 2p in its low nibbles and
    // quad 2p + 1 in its high ones.
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int p = 0; p < F::kGroup / 8; ++p) {
      const __m512i w = LoadPair(ra + 32 * p, rb + 32 * p);
      _mm512_storeu_si512(out + 128 * p, _mm512_and_si512(w, low));
      _mm512_storeu_si512(out + 128 * p + 64, _mm512_and_si512(_mm512_srli_epi16(w, 4), low));
    }
  } else {
    for (int u = 0; u < F::kGroup / 4; ++u) {
      _mm512_storeu_si512(out + 64 * u, LoadPair(ra + 32 * u, rb + 32 * u));
    }
  }
}

// The pair of weight tiles at ta and tb, with their B operands.
struct PairValues {
  const uint8_t* tile[2];
  const uint8_t* b;  // [group][G/4][64]
};

template <typename F>
PairValues PreparePair(const uint8_t* ta, const uint8_t* tb, const QuantRecord& rec,
                       int64_t groups, std::vector<uint8_t>& scratch) {
  constexpr int64_t kBBytes = F::kGroup / 4 * kBRowBytes;
  if (scratch.size() < static_cast<size_t>(groups * kBBytes)) {
    scratch.resize(static_cast<size_t>(groups * kBBytes));
  }
  for (int64_t g = 0; g < groups; ++g) {
    BuildB<F>(QuantRecordAt(rec, ta, g), QuantRecordAt(rec, tb, g), scratch.data() + g * kBBytes);
  }
  return {{ta, tb}, scratch.data()};
}

// Exact dot products of groups [g0, g0 + count) for rows [i0, i0 + m) of x
// against the pair, into dots[c] (row r at dots[c] + 16r).
template <typename F, int kCount>
inline void ChunkDots(const PairValues& p, const QuantizedRows& x, int64_t i0, int64_t g0,
                      int32_t (*dots)[kBlockRows * 16]) {
  constexpr int64_t kBBytes = F::kGroup / 4 * kBRowBytes;
  const int8_t* a = x.q.data() + i0 * x.k + g0 * F::kGroup;
  // The tile intrinsics take tile numbers as literal tokens.
#define TESSERA_GROUP_PRODUCT(C, B, c)                                  \
  do {                                                                  \
    _tile_loadd(4, a + (c) * F::kGroup, x.k);                           \
    _tile_loadd(B, p.b + (g0 + (c)) * kBBytes, kBRowBytes);             \
    _tile_zero(C);                                                      \
    if constexpr (F::kSigned) {                                         \
      _tile_dpbssd(C, 4, B);                                            \
    } else {                                                            \
      _tile_dpbsud(C, 4, B);                                            \
    }                                                                   \
  } while (0)
  TESSERA_GROUP_PRODUCT(0, 5, 0);
  if constexpr (kCount > 1) TESSERA_GROUP_PRODUCT(1, 6, 1);
  if constexpr (kCount > 2) TESSERA_GROUP_PRODUCT(2, 5, 2);
  if constexpr (kCount > 3) TESSERA_GROUP_PRODUCT(3, 6, 3);
#undef TESSERA_GROUP_PRODUCT
  _tile_stored(0, dots[0], 64);
  if constexpr (kCount > 1) _tile_stored(1, dots[1], 64);
  if constexpr (kCount > 2) _tile_stored(2, dots[2], 64);
  if constexpr (kCount > 3) _tile_stored(3, dots[3], 64);
}

// Adds group g's products (dots, from ChunkDots) to acc[r] for a block of
// rows, whose steps are dx[r] and dsum[r] (GatherRowSteps).
template <int M, typename F>
inline void GroupSteps(const PairValues& p, const QuantRecord& rec, int64_t g, const float* dx,
                       const float* dsum, const int32_t* dots, __m512 acc[M]) {
  const int64_t s = g / rec.groups_per_super;
  const uint8_t* sa = p.tile[0] + s * rec.super_bytes;
  const uint8_t* sb = p.tile[1] + s * rec.super_bytes;
  const __m512 a = LoadHalvesPair(sa, sb);  // the types here have no per-group ints
  for (int r = 0; r < M; ++r) {
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(dots + 16 * r));
    acc[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(a, _mm512_set1_ps(dx[r])), acc[r]);
  }
  if constexpr (F::kHasB) {
    const __m512 b = _mm512_mul_ps(LoadHalvesPair(sa + 2 * kQuantTileRows, sb + 2 * kQuantTileRows),
                                   _mm512_set1_ps(rec.sb_const));
    for (int r = 0; r < M; ++r) acc[r] = _mm512_fmadd_ps(b, _mm512_set1_ps(dsum[r]), acc[r]);
  }
}

// Rows [i0, i0 + m) (m ≤ M ≤ 16) against the pair; acc[r] gets row i0 + r's
// 16 outputs. The tile products of a chunk of groups go to memory before
// their float steps read them. Rows past m (dots kept from earlier, zero at
// first; other rows' steps) are computed and never stored.
template <int M, typename F>
void BlockPass(const PairValues& p, const QuantRecord& rec, const QuantizedRows& x, int64_t i0,
               const RowSteps& steps, __m512 acc[M]) {
  const int64_t groups = x.k / F::kGroup, full = groups / kChunkGroups * kChunkGroups;
  alignas(64) thread_local int32_t dots[2][kChunkGroups][kBlockRows * 16] = {};
  for (int r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps();
  // Software pipelined: the next chunk's products are stored before this
  // chunk's float steps read theirs, so the loads do not wait on the stores.
  if (full > 0) ChunkDots<F, kChunkGroups>(p, x, i0, 0, dots[0]);
  for (int64_t g0 = 0; g0 < full; g0 += kChunkGroups) {
    const int64_t cur = (g0 / kChunkGroups) % 2;
    if (g0 + kChunkGroups < full) {
      ChunkDots<F, kChunkGroups>(p, x, i0, g0 + kChunkGroups, dots[1 - cur]);
    }
    for (int64_t c = 0; c < kChunkGroups; ++c) {
      const int64_t at = (g0 + c) * x.n + i0;
      GroupSteps<M, F>(p, rec, g0 + c, &steps.dx[at], &steps.dsum[at], dots[cur][c], acc);
    }
  }
  for (int64_t g = full; g < groups; ++g) {
    ChunkDots<F, 1>(p, x, i0, g, dots[0]);
    const int64_t at = g * x.n + i0;
    GroupSteps<M, F>(p, rec, g, &steps.dx[at], &steps.dsum[at], dots[0][0], acc);
  }
}

template <int M, typename F>
inline void Block(const PairValues& p, const QuantRecord& rec, const QuantizedRows& x,
                  const RowSteps& steps, int64_t i0, int m, int64_t t, bool pair, const Weight& w,
                  const float* bias, float* y) {
  __m512 acc[M];
  BlockPass<M, F>(p, rec, x, i0, steps, acc);
  for (int r = 0; r < m; ++r) StorePair(acc[r], i0 + r, t, pair, w, bias, y);
}

template <typename F>
void Run(const QuantizedRows& x, const Weight& w, const float* bias, float* y, int64_t t0,
         int64_t t1, const QuantRecord& rec) {
  thread_local std::vector<uint8_t> scratch;
  const RowSteps& steps = GatherRowSteps(x, F::kGroup);
  const int64_t tile_bytes = QuantTileBytes(rec, w.cols), groups = w.cols / F::kGroup;
  int configured = -1;
  for (int64_t t = t0; t < t1; t += 2) {
    // A last tile without a partner is computed twice and stored once.
    const bool pair = t + 1 < t1;
    const uint8_t* ta = static_cast<const uint8_t*>(w.data) + t * tile_bytes;
    const PairValues p =
        PreparePair<F>(ta, pair ? ta + tile_bytes : ta, rec, groups, scratch);
    for (int64_t i0 = 0; i0 < x.n; i0 += kBlockRows) {
      const int m = static_cast<int>(std::min<int64_t>(kBlockRows, x.n - i0));
      if (m != configured) {
        ConfigureTiles(m, F::kGroup);
        configured = m;
      }
      switch ((m + 3) / 4) {
        case 4: Block<16, F>(p, rec, x, steps, i0, m, t, pair, w, bias, y); break;
        case 3: Block<12, F>(p, rec, x, steps, i0, m, t, pair, w, bias, y); break;
        case 2: Block<8, F>(p, rec, x, steps, i0, m, t, pair, w, bias, y); break;
        default: Block<4, F>(p, rec, x, steps, i0, m, t, pair, w, bias, y); break;
      }
    }
  }
  _tile_release();
}

}  // namespace

void QuantLinearAmx(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                    int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  if (x.n >= kMinAmxRows && AmxSplitScalesApply(w.dtype)) {
    return QuantLinearAmxSplitScales(x, w, bias, y, tile_begin, tile_end);
  }
  if (x.n < kMinAmxRows || rec.has_b || rec.group != 32 || rec.values != nullptr ||
      rec.zero != 0) {
    return Avx512VnniKernel()(x, w, bias, y, tile_begin, tile_end);
  }
  QuantLinearAmxTiles(x, w, bias, y, tile_begin, tile_end);
}

void QuantLinearAmxTiles(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                         int64_t tile_begin, int64_t tile_end) {
  if (AmxSplitScalesApply(w.dtype)) {
    return QuantLinearAmxSplitScales(x, w, bias, y, tile_begin, tile_end);
  }
  const QuantRecord rec = QuantRecordOf(w.dtype);
  VisitQuantForm(w.dtype, [&](auto form) {
    using F = decltype(form);
    if constexpr (!F::kPerGroupInts && !F::kNonlinear && F::kZero == 0) {
      Run<F>(x, w, bias, y, tile_begin, tile_end, rec);
    } else {  // forms these tiles do not take
      Avx512VnniKernel()(x, w, bias, y, tile_begin, tile_end);
    }
  });
}

}  // namespace tessera::cpu

TESSERA_ISA_END
