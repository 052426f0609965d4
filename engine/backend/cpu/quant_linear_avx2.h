// The 256-bit twins of QuantLinearPortable (quant_linear.h), included by
// quant_linear_avx2.cc (AVX2, FMA, F16C) and quant_linear_avxvnni.cc (the
// same with AVX-VNNI) inside their instruction-set regions; everything here
// has internal linkage, so that each file keeps the code built for its own
// instruction set.
//
// One register holds, for 4 inputs, the values of all 8 rows of a tile; an
// input quad of an activation row is broadcast to every lane, so vpmaddubsw
// + vpmaddwd (or one vpdpbusd with AVX-VNNI) give 8 rows' partial dot
// products at once and no horizontal sums are needed. Up to 4 activation
// rows share each weight load. For the K types, the vpmaddwd that widens a
// group's int16 sums multiplies them by the group's scales (vpmulld after
// vpdpbusd with AVX-VNNI), so a superblock's groups add in integers. The
// integer sums are exact, so every variant gives the portable kernel's
// bits.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/backend/cpu/quant_linear.h"
#include "engine/quant/blocks.h"

namespace tessera::cpu {
namespace {  // NOLINT(build/namespaces): internal linkage per instruction set

constexpr int kRowsPerPass = 4;
// The first pass over a tile asks for the weights kPrefetchBytes ahead of
// the record it reads, one request per 64-byte line spread over the records
// (the tiles of a range lie one after another), so that a decode step, which
// reads each weight once from DRAM, keeps more reads in flight than the
// hardware prefetcher starts alone (BM_QuantLinearMemory measures it).
constexpr int64_t kPrefetchBytes = 4096;

inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

#ifdef TESSERA_AVXVNNI
// Adds Σ over 4 inputs of w·x (8 rows, one int32 lane each) to acc.
template <bool kSigned>
inline __m256i DotQuad(__m256i acc, __m256i w, __m256i x) {
  const __m256i uw = kSigned ? _mm256_abs_epi8(w) : w;
  const __m256i sx = kSigned ? _mm256_sign_epi8(x, w) : x;
  return _mm256_dpbusd_avx_epi32(acc, uw, sx);
}
#endif

inline __m256 LoadHalves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// quant::kIq4Values in both 128-bit lanes, for vpshufb.
inline __m256i Iq4Table() {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4Values)));
}

// Weights of quad u (inputs [4u, 4u + 4)) of a record, 8 rows.
template <typename F>
inline __m256i QuadWeights(const uint8_t* record, int u) {
  if constexpr (F::kNibbles) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + 32 * (u / 2)));
    const __m256i q = _mm256_and_si256(u % 2 ? _mm256_srli_epi16(w, 4) : w,
                                       _mm256_set1_epi8(0x0F));
    return F::kNonlinear ? _mm256_shuffle_epi8(Iq4Table(), q) : q;
  } else {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + 32 * u));
  }
}

#ifndef TESSERA_AVXVNNI
// How many vpmaddubsw results int16 lanes can add exactly: activations are
// in [-127, 127], so each pair sum (never saturated) is
// at most 2·kMaxQ·127 in magnitude (8 for 4-bit values, 4 for 5-bit and
// Q6_K, 18 for Q2_K and Q3_K, 1 for Q8_0 and the IQ4 types).
// Q4_0's and Q5_0's zero comes off each group's sum afterwards (GroupSteps).
template <typename F>
constexpr int kSums16 = 32767 / (2 * F::kMaxQ * 127);
#endif

// The multiplier of a group's dot products in RecordDots: 1 for the
// types with a float step per group, the group's 8 scales sa for the K
// types (as the int16 pairs (sa, sa) that vpmaddwd takes, or as int32 with
// VNNI).
template <typename F>
inline __m256i GroupMultiplier(const uint8_t* ints) {
  if constexpr (!F::kPerGroupInts) {
#ifdef TESSERA_AVXVNNI
    return _mm256_set1_epi32(1);
#else
    return _mm256_set1_epi16(1);
#endif
  } else {
    const __m128i sa = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(ints));
#ifdef TESSERA_AVXVNNI
    return _mm256_cvtepi8_epi32(sa);
#else
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(sa, sa));
#endif
  }
}

// Adds mult · Σ q_w·q_x of one record for rows [i0, i0 + R) of x to dot[r]
// (8 outputs each). Without VNNI, the pair sums of up to kSums16 quads add
// in int16 before one vpmaddwd widens them and multiplies (exact, so the
// bits do not change).
template <int R, typename F>
inline void RecordDots(const uint8_t* record, const int8_t* xq, int64_t k, __m256i mult,
                       __m256i dot[R]) {
  constexpr int kQuads = F::kGroup / 4;
#ifdef TESSERA_AVXVNNI
  __m256i group[R];
  for (int r = 0; r < R; ++r) group[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int u = 0; u < kQuads; ++u) {
    const __m256i w = QuadWeights<F>(record, u);
    for (int r = 0; r < R; ++r) {
      group[r] = DotQuad<F::kSigned>(group[r], w, Broadcast4(xq + r * k + 4 * u));
    }
  }
  for (int r = 0; r < R; ++r) {
    dot[r] = _mm256_add_epi32(dot[r], F::kPerGroupInts ? _mm256_mullo_epi32(group[r], mult)
                                                       : group[r]);
  }
#else
  constexpr int kRun = kSums16<F>;
  static_assert(kRun >= 1);
  __m256i part[R];
#pragma GCC unroll 8
  for (int u = 0; u < kQuads; ++u) {
    const __m256i w = QuadWeights<F>(record, u);
    const __m256i uw = F::kSigned ? _mm256_abs_epi8(w) : w;
    for (int r = 0; r < R; ++r) {
      const __m256i x = Broadcast4(xq + r * k + 4 * u);
      const __m256i pairs = _mm256_maddubs_epi16(uw, F::kSigned ? _mm256_sign_epi8(x, w) : x);
      part[r] = u % kRun == 0 ? pairs : _mm256_add_epi16(part[r], pairs);
      if (u % kRun == kRun - 1 || u == kQuads - 1) {
        dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(part[r], mult));
      }
    }
  }
#endif
}

// With kPrefetch, asks for the lines from *ahead up to kPrefetchBytes past
// the end of the record at `record` (an address: it may lie past the
// weight, which a prefetch may name but a pointer may not).
template <bool kPrefetch>
inline void PrefetchPast(const uint8_t* record, const QuantRecord& rec, uintptr_t* ahead) {
  if constexpr (kPrefetch) {
    const uintptr_t end = reinterpret_cast<uintptr_t>(record) + rec.bytes + kPrefetchBytes;
    for (; *ahead < end; *ahead += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(*ahead), _MM_HINT_T0);
    }
  }
}

// Superblock s of a tile (at `super`) for the types with 32-value
// activation blocks: a float step per group.
template <int R, bool kPrefetch, typename F>
inline void GroupSteps(const uint8_t* super, const QuantRecord& rec, const QuantizedRows& x,
                       const RowSteps& steps, int64_t i0, int64_t s, uintptr_t* ahead,
                       __m256 acc[R]) {
  const int64_t k = x.k;
  const __m256 a = LoadHalves(super);
  const __m256 b = F::kHasB ? _mm256_mul_ps(LoadHalves(super + 2 * kQuantTileRows),
                                            _mm256_set1_ps(rec.sb_const))
                            : _mm256_setzero_ps();
  for (int64_t gg = 0; gg < rec.groups_per_super; ++gg) {
    const uint8_t* record = super + rec.header_bytes + gg * rec.bytes;
    PrefetchPast<kPrefetch>(record, rec, ahead);
    const int64_t first = (s * rec.groups_per_super + gg) * F::kGroup;
    __m256i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_si256();
    RecordDots<R, F>(record, x.q.data() + i0 * k + first, k, GroupMultiplier<F>(nullptr), dot);
    const int64_t at = (first / F::kGroup) * x.n + i0;  // GatherRowSteps
    if constexpr (F::kZero != 0) {  // Σ (q - zero)·q_x, exact
      for (int r = 0; r < R; ++r) {
        dot[r] = _mm256_sub_epi32(dot[r], _mm256_set1_epi32(F::kZero * steps.xsum[at + r]));
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 step = _mm256_mul_ps(a, _mm256_set1_ps(steps.dx[at + r]));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), step, acc[r]);
    }
    if constexpr (F::kHasB) {
      for (int r = 0; r < R; ++r) {
        acc[r] = _mm256_fmadd_ps(b, _mm256_set1_ps(steps.dsum[at + r]), acc[r]);
      }
    }
  }
}

// ib[r] += Σ_g sb_g · Σ q_x over superblock s's groups (K types with
// offsets): two groups' offsets per vpmaddwd, as int16 pairs per row,
// against the rows' paired sums (RowSteps::xpair).
template <int R>
inline void OffsetSums(const uint8_t* super, const QuantRecord& rec, const RowSteps& steps,
                       int64_t n, int64_t i0, int64_t s, __m256i ib[R]) {
  const int64_t pairs = rec.groups_per_super / 2;
  for (int64_t h = 0; h < pairs; ++h) {
    const uint8_t* even = super + rec.header_bytes + 2 * h * rec.bytes + rec.value_bytes;
    const __m128i sb = _mm_unpacklo_epi8(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(even + kQuantTileRows)),
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(even + rec.bytes + kQuantTileRows)));
    const __m256i sb16 = _mm256_cvtepi8_epi16(sb);
    const int32_t* xpair = steps.xpair.data() + (s * pairs + h) * n + i0;
    for (int r = 0; r < R; ++r) {
      ib[r] = _mm256_add_epi32(ib[r], _mm256_madd_epi16(sb16, _mm256_set1_epi32(xpair[r])));
    }
  }
}

// Superblock s of a tile (at `super`) for the K types: its groups' dot
// products, times their scales, and the offset sums add in integers, then
// one float step each (quant_linear.h).
template <int R, bool kPrefetch, typename F>
inline void SuperSteps(const uint8_t* super, const QuantRecord& rec, const QuantizedRows& x,
                       const RowSteps& steps, int64_t i0, int64_t s, uintptr_t* ahead,
                       __m256 acc[R]) {
  static_assert(F::kZero == 0, "a zero is taken off in GroupSteps only");
  const int64_t k = x.k;
  __m256i ia[R], ib[R];
  for (int r = 0; r < R; ++r) ia[r] = ib[r] = _mm256_setzero_si256();
  for (int64_t gg = 0; gg < rec.groups_per_super; ++gg) {
    const uint8_t* record = super + rec.header_bytes + gg * rec.bytes;
    PrefetchPast<kPrefetch>(record, rec, ahead);
    const int64_t first = (s * rec.groups_per_super + gg) * F::kGroup;
    RecordDots<R, F>(record, x.q.data() + i0 * k + first, k,
                     GroupMultiplier<F>(record + rec.value_bytes), ia);
  }
  if constexpr (F::kHasB) OffsetSums<R>(super, rec, steps, x.n, i0, s, ib);
  const int64_t at = s * rec.groups_per_super * x.n + i0;  // dx of the superblock
  const __m256 a = LoadHalves(super);
  const __m256 b = F::kHasB ? LoadHalves(super + 2 * kQuantTileRows) : _mm256_setzero_ps();
  for (int r = 0; r < R; ++r) {
    const __m256 dx = _mm256_set1_ps(steps.dx[at + r]);
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r]), _mm256_mul_ps(a, dx), acc[r]);
    if constexpr (F::kHasB) {
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ib[r]), _mm256_mul_ps(b, dx), acc[r]);
    }
  }
}

// Rows [i0, i0 + R) of x against one tile; acc[r] gets row i0 + r's 8
// outputs. With kPrefetch, it asks for the weights ahead (kPrefetchBytes).
template <int R, bool kPrefetch, typename F>
void TilePass(const uint8_t* tile, const QuantRecord& rec, const QuantizedRows& x,
              const RowSteps& steps, int64_t i0, __m256 acc[R]) {
  const int64_t supers = x.k / F::kGroup / rec.groups_per_super;
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  uintptr_t ahead = reinterpret_cast<uintptr_t>(tile) + kPrefetchBytes;
  for (int64_t s = 0; s < supers; ++s) {
    const uint8_t* super = tile + s * rec.super_bytes;
    if constexpr (F::kPerGroupInts) {
      SuperSteps<R, kPrefetch, F>(super, rec, x, steps, i0, s, &ahead, acc);
    } else {
      GroupSteps<R, kPrefetch, F>(super, rec, x, steps, i0, s, &ahead, acc);
    }
  }
}

// TilePass for rows [i0, i0 + R), prefetching on the tile's first pass.
template <int R, typename F>
inline void RowsPass(const uint8_t* tile, const QuantRecord& rec, const QuantizedRows& x,
                     const RowSteps& steps, int64_t i0, __m256 acc[R]) {
  if (i0 == 0) return TilePass<R, true, F>(tile, rec, x, steps, i0, acc);
  TilePass<R, false, F>(tile, rec, x, steps, i0, acc);
}

inline void StoreRow(__m256 acc, int64_t i, int64_t t, const Weight& w, const float* bias,
                     float* y) {
  const int64_t j0 = t * kQuantTileRows;
  const int64_t valid = std::min<int64_t>(kQuantTileRows, w.rows - j0);
  alignas(32) float out[kQuantTileRows];
  _mm256_store_ps(out, acc);
  for (int64_t r = 0; r < valid; ++r) y[i * w.rows + j0 + r] = out[r] + (bias ? bias[j0 + r] : 0.0f);
}

template <typename F>
void Run(const QuantizedRows& x, const Weight& w, const float* bias, float* y, int64_t t0,
         int64_t t1, const QuantRecord& rec) {
  const int64_t tile_bytes = QuantTileBytes(rec, w.cols);
  const RowSteps& steps = GatherRowSteps(x, F::kGroup);
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* tile = static_cast<const uint8_t*>(w.data) + t * tile_bytes;
    int64_t i = 0;
    for (; i + kRowsPerPass <= x.n; i += kRowsPerPass) {
      __m256 acc[kRowsPerPass];
      RowsPass<kRowsPerPass, F>(tile, rec, x, steps, i, acc);
      for (int r = 0; r < kRowsPerPass; ++r) StoreRow(acc[r], i + r, t, w, bias, y);
    }
    for (; i < x.n; ++i) {
      __m256 acc[1];
      RowsPass<1, F>(tile, rec, x, steps, i, acc);
      StoreRow(acc[0], i, t, w, bias, y);
    }
  }
}

// Every type's kernel, with the dot products of this file's instruction set.
void QuantLinear256(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                    int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  VisitQuantForm(w.dtype, [&](auto form) {
    Run<decltype(form)>(x, w, bias, y, tile_begin, tile_end, rec);
  });
}

}  // namespace
}  // namespace tessera::cpu
