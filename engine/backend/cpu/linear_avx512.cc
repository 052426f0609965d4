// AVX-512 linear kernels, compiled with -mavx512f -mf16c -mfma and selected
// at run time. Each output element's dot product runs in the same order for
// any number of rows: 16-wide FMAs over the input dimension, one horizontal
// reduction, then the scalar tail.
#include <immintrin.h>

// GCC 12's avx512fintrin.h builds some intrinsics (the 512-bit reductions and
// conversions) on deliberately undefined registers and then warns about them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "engine/backend/cpu/kernels.h"

namespace tessera::cpu {
namespace {

// Loads 16 weights starting at element c of row `row` as f32.
template <DType kType>
inline __m512 Load16(const void* row, int64_t c) {
  if constexpr (kType == DType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + c);
  } else if constexpr (kType == DType::kF16) {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + c));
    return _mm512_cvtph_ps(h);
  } else {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + c));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <DType kType>
inline const void* RowPtr(const Weight& w, int64_t j) {
  const size_t elem = (kType == DType::kF32) ? 4 : 2;
  return static_cast<const uint8_t*>(w.data) + static_cast<size_t>(j * w.cols) * elem;
}

// NR rows of x against one weight row. Four accumulators per row hide the
// FMA latency; chunk c of 16 always goes to accumulator (c / 16) % 4, and the
// four are combined in a fixed order, so a row's result is the same for
// every NR.
template <DType kType, int NR>
inline void DotTile(const float* x, int64_t k, const Weight& w, int64_t j, float* out) {
  const void* wr = RowPtr<kType>(w, j);
  __m512 acc[NR][4];
  for (int r = 0; r < NR; ++r) {
    for (int u = 0; u < 4; ++u) acc[r][u] = _mm512_setzero_ps();
  }
  const int64_t k64 = k & ~int64_t{63};
  const int64_t k16 = k & ~int64_t{15};
  for (int64_t c = 0; c < k64; c += 64) {
    for (int u = 0; u < 4; ++u) {
      const __m512 wv = Load16<kType>(wr, c + 16 * u);
      for (int r = 0; r < NR; ++r) {
        acc[r][u] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * k + c + 16 * u), wv, acc[r][u]);
      }
    }
  }
  for (int64_t c = k64; c < k16; c += 16) {
    const int u = static_cast<int>((c / 16) % 4);
    const __m512 wv = Load16<kType>(wr, c);
    for (int r = 0; r < NR; ++r) {
      acc[r][u] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * k + c), wv, acc[r][u]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]),
                                     _mm512_add_ps(acc[r][2], acc[r][3]));
    float s = _mm512_reduce_add_ps(sum);
    for (int64_t c = k16; c < k; ++c) s += x[r * k + c] * WeightAt(w, j * k + c);
    out[r] = s;
  }
}

template <DType kType>
void LinearTyped(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                 int64_t col_begin, int64_t col_end) {
  const int64_t k = w.cols;
  const int64_t m = w.rows;
  // Column blocks small enough that their weights stay in L2 while all rows
  // stream past them.
  const int64_t block = std::max<int64_t>(1, (256 * 1024) / (k * 4));
  float out[4];
  for (int64_t j0 = col_begin; j0 < col_end; j0 += block) {
    const int64_t j1 = std::min(col_end, j0 + block);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      for (int64_t j = j0; j < j1; ++j) {
        DotTile<kType, 4>(x + i * k, k, w, j, out);
        for (int r = 0; r < 4; ++r) y[(i + r) * m + j] = out[r] + (bias ? bias[j] : 0.0f);
      }
    }
    for (; i < n; ++i) {
      for (int64_t j = j0; j < j1; ++j) {
        DotTile<kType, 1>(x + i * k, k, w, j, out);
        y[i * m + j] = out[0] + (bias ? bias[j] : 0.0f);
      }
    }
  }
}

}  // namespace

void LinearAvx512(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                  int64_t col_begin, int64_t col_end) {
  switch (w.dtype) {
    case DType::kF32:
      return LinearTyped<DType::kF32>(x, n, w, bias, y, col_begin, col_end);
    case DType::kF16:
      return LinearTyped<DType::kF16>(x, n, w, bias, y, col_begin, col_end);
    case DType::kBF16:
      return LinearTyped<DType::kBF16>(x, n, w, bias, y, col_begin, col_end);
  }
}

}  // namespace tessera::cpu
