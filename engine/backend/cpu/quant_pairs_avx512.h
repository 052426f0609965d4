// Loads and stores of pairs of quantized tiles (16 outputs), shared by the
// AVX-512 quantized kernels (quant_linear_avx512vnni.cc,
// quant_linear_amx.cc, quant_linear_k_amx.cc), which include it inside
// their instruction-set regions; everything here has internal linkage, so
// that each file keeps the code built for its own instruction set.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/backend/cpu/quant_linear.h"

namespace tessera::cpu {
namespace {  // NOLINT(build/namespaces): internal linkage per instruction set

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

inline __m128i Load8(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}

// Asks for the cache lines of [p, p + bytes) ahead of their use.
inline void PrefetchBytes(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + line), _MM_HINT_T0);
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

// The AMX kernels of the K types (quant_linear_k_amx.cc,
// quant_linear_q6k_amx.cc) take the rows in chunks and the pairs of tiles in
// groups of kGroupPairs, superblock by superblock, so that a chunk's A tiles
// of one superblock stay in the L1 cache while every pair of the group meets
// them; the float sums wait in memory between superblocks, each row's steps
// in the same order as pair by pair.
constexpr int64_t kGroupPairs = 32;

// Pairs [p0, p1) of tiles [t0, t1) (pair p: tiles t0 + 2p and t0 + 2p + 1,
// of the records rec) against rows [c0, c1): super(ta, tb, s, c0, c1, sums)
// adds superblock s of the pair whose tiles start at ta and tb (tb = ta for
// a last tile without a partner, computed twice and stored once) to its
// rows' float sums (16 a row, row c0 first; a block of m rows may read up
// to max_extra_rows more). Then the sums, plus bias, go to y.
template <typename Super>
void PairGroupBySuperblock(const Weight& w, const QuantRecord& rec, const float* bias, float* y,
                           int64_t t0, int64_t t1, int64_t p0, int64_t p1, int64_t c0, int64_t c1,
                           int64_t max_extra_rows, Super& super) {
  thread_local std::vector<float> storage;
  const int64_t rows = c1 - c0, tile_bytes = QuantTileBytes(rec, w.cols);
  const int64_t super_bytes = rec.super_bytes, supers = w.cols / rec.group / rec.groups_per_super;
  storage.assign(static_cast<size_t>(((p1 - p0) * rows + max_extra_rows + 1) * 16), 0.0f);
  float* sums = Aligned64(storage);
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  for (int64_t s = 0; s < supers; ++s) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t t = t0 + 2 * p;
      const uint8_t* ta = base + t * tile_bytes;
      const uint8_t* tb = t + 1 < t1 ? ta + tile_bytes : ta;
      // Superblock s of the next pair, which the hardware prefetchers,
      // stopping at page ends, do not fetch: on the Xeon with AMX, a served
      // Q4_K_M run at 16 streams (bench-quant.sh's load) 1.10x (6 pairs).
      if (p + 1 < p1) PrefetchBytes(ta + 2 * tile_bytes + s * super_bytes, super_bytes);
      if (t + 3 < t1) PrefetchBytes(ta + 3 * tile_bytes + s * super_bytes, super_bytes);
      super(ta, tb, s, c0, c1, sums + (p - p0) * rows * 16);
    }
  }
  for (int64_t p = p0; p < p1; ++p) {
    for (int64_t i = c0; i < c1; ++i) {
      const __m512 acc = _mm512_load_ps(sums + ((p - p0) * rows + i - c0) * 16);
      StorePair(acc, i, t0 + 2 * p, t0 + 2 * p + 1 < t1, w, bias, y);
    }
  }
}

// Every row of x (in chunks of chunk_rows) against tiles [t0, t1), with
// super as in PairGroupBySuperblock.
template <typename Super>
void PairsBySuperblock(const QuantizedRows& x, const Weight& w, const QuantRecord& rec,
                       const float* bias, float* y, int64_t t0, int64_t t1, int64_t chunk_rows,
                       int64_t max_extra_rows, Super&& super) {
  const int64_t pairs = (t1 - t0 + 1) / 2;
  for (int64_t c0 = 0; c0 < x.n; c0 += chunk_rows) {
    for (int64_t p0 = 0; p0 < pairs; p0 += kGroupPairs) {
      PairGroupBySuperblock(w, rec, bias, y, t0, t1, p0, std::min(pairs, p0 + kGroupPairs), c0,
                            std::min(x.n, c0 + chunk_rows), max_extra_rows, super);
    }
  }
}

}  // namespace
}  // namespace tessera::cpu
