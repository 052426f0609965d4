// AVX2 twin of QuantLinearPortable (quant_linear.h), compiled with -mavx2
// -mfma and chosen at run time. One register holds, for 4 inputs, the
// values of all 8 rows of a tile; an input quad of an activation row is
// broadcast to every lane, so vpmaddubsw + vpmaddwd give 8 rows' partial
// dot products at once and no horizontal sums are needed. Up to 4
// activation rows share each weight load.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/backend/cpu/quant_linear.h"

namespace tessera::cpu {
namespace {

constexpr int kRowsPerPass = 4;

inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Adds Σ over 4 inputs of w·x (8 rows, one int32 lane each) to acc.
template <bool kSigned>
inline __m256i DotQuad(__m256i acc, __m256i w, __m256i x) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i prod;
  if constexpr (kSigned) {
    prod = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  } else {
    prod = _mm256_maddubs_epi16(w, x);
  }
  return _mm256_add_epi32(acc, _mm256_madd_epi16(prod, ones));
}

// Rows [i0, i0 + R) of x against one tile; acc[r] gets row i0 + r's 8 outputs.
template <int R, int kGroup, bool kNibbles, bool kSigned>
void TilePass(const uint8_t* tile, int64_t groups, int64_t value_bytes, const QuantizedRows& x,
              int64_t i0, __m256 acc[R]) {
  const int64_t k = x.k;
  const __m256i low = _mm256_set1_epi8(0x0F);
  const int64_t record_bytes = value_bytes + 64;
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* record = tile + g * record_bytes;
    __m256i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm256_setzero_si256();
    const int8_t* xq = x.q.data() + i0 * k + g * kGroup;
    if constexpr (kNibbles) {
      for (int p = 0; p < kGroup / 8; ++p) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + 32 * p));
        const __m256i lo = _mm256_and_si256(w, low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
        for (int r = 0; r < R; ++r) {
          dot[r] = DotQuad<false>(dot[r], lo, Broadcast4(xq + r * k + 8 * p));
          dot[r] = DotQuad<false>(dot[r], hi, Broadcast4(xq + r * k + 8 * p + 4));
        }
      }
    } else {
      for (int p = 0; p < kGroup / 4; ++p) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + 32 * p));
        for (int r = 0; r < R; ++r) dot[r] = DotQuad<kSigned>(dot[r], w, Broadcast4(xq + r * k + 4 * p));
      }
    }
    const float* scales = reinterpret_cast<const float*>(record + value_bytes);
    const __m256 a = _mm256_loadu_ps(scales), b = _mm256_loadu_ps(scales + 8);
    const int64_t first = g * kGroup;
    for (int r = 0; r < R; ++r) {
      const int64_t i = i0 + r;
      const float dx = x.d[i * (k / kActBlock) + first / kActBlock];
      int32_t xsum = x.sums[i * (k / kActSumBlock) + first / kActSumBlock];
      if constexpr (kGroup == 32) xsum += x.sums[i * (k / kActSumBlock) + first / kActSumBlock + 1];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), _mm256_mul_ps(a, _mm256_set1_ps(dx)),
                               acc[r]);
      acc[r] = _mm256_fmadd_ps(b, _mm256_set1_ps(dx * static_cast<float>(xsum)), acc[r]);
    }
  }
}

inline void StoreRow(__m256 acc, int64_t i, int64_t t, const Weight& w, const float* bias,
                     float* y) {
  const int64_t j0 = t * kQuantTileRows;
  const int64_t valid = std::min<int64_t>(kQuantTileRows, w.rows - j0);
  alignas(32) float out[kQuantTileRows];
  _mm256_store_ps(out, acc);
  for (int64_t r = 0; r < valid; ++r) y[i * w.rows + j0 + r] = out[r] + (bias ? bias[j0 + r] : 0.0f);
}

template <int kGroup, bool kNibbles, bool kSigned>
void Run(const QuantizedRows& x, const Weight& w, const float* bias, float* y, int64_t t0,
         int64_t t1, int64_t value_bytes) {
  const int64_t groups = w.cols / kGroup;
  const int64_t tile_bytes = groups * (value_bytes + 64);
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* tile = static_cast<const uint8_t*>(w.data) + t * tile_bytes;
    int64_t i = 0;
    for (; i + kRowsPerPass <= x.n; i += kRowsPerPass) {
      __m256 acc[kRowsPerPass];
      TilePass<kRowsPerPass, kGroup, kNibbles, kSigned>(tile, groups, value_bytes, x, i, acc);
      for (int r = 0; r < kRowsPerPass; ++r) StoreRow(acc[r], i + r, t, w, bias, y);
    }
    for (; i < x.n; ++i) {
      __m256 acc[1];
      TilePass<1, kGroup, kNibbles, kSigned>(tile, groups, value_bytes, x, i, acc);
      StoreRow(acc[0], i, t, w, bias, y);
    }
  }
}

}  // namespace

void QuantLinearAvx2(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                     int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  if (rec.nibbles) return Run<32, true, false>(x, w, bias, y, tile_begin, tile_end, rec.value_bytes);
  if (rec.signed_q) return Run<32, false, true>(x, w, bias, y, tile_begin, tile_end, rec.value_bytes);
  if (rec.group == 16) {
    return Run<16, false, false>(x, w, bias, y, tile_begin, tile_end, rec.value_bytes);
  }
  Run<32, false, false>(x, w, bias, y, tile_begin, tile_end, rec.value_bytes);
}

}  // namespace tessera::cpu
