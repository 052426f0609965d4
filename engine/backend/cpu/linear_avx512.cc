// AVX-512 linear kernel over panel-packed weights (kernels.h), built for
// AVX-512, F16C and FMA and selected at run time.
//
// A tile of R rows × P panels keeps R·P accumulators of 16 outputs each. Per
// input position p it loads P weight vectors (16 outputs each), broadcasts
// R inputs and issues R·P FMAs; no horizontal reductions are needed. Lane l
// of an accumulator sums x[i, p]·w[j, p] over p in order, the same way for
// every tile shape, so a row's outputs do not depend on the batch.
#include <immintrin.h>

#include <algorithm>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX512)

#include "engine/backend/cpu/panel_store_avx512.h"

// GCC 12's avx512fintrin.h builds some intrinsics on deliberately undefined
// registers and then warns about them.
namespace tessera::cpu {
namespace {

constexpr int64_t kPrefetchRows = 64;

// The 16 weights of input position p in a panel, as f32.
template <DType kType>
inline __m512 LoadPanelRow(const void* panel, int64_t p) {
  if constexpr (kType == DType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(panel) + p * kPanelRows);
  } else {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(panel) + p * kPanelRows));
    if constexpr (kType == DType::kF16) {
      return _mm512_cvtph_ps(h);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
}

template <DType kType>
inline const void* PanelPtr(const Weight& w, int64_t q) {
  constexpr size_t kElem = (kType == DType::kF32) ? 4 : 2;
  return static_cast<const uint8_t*>(w.data) + static_cast<size_t>(q * w.cols * kPanelRows) * kElem;
}

// Rows [i0, i0 + R) × panels [q0, q0 + P).
template <DType kType, int R, int P>
inline void Tile(const float* x, int64_t i0, int64_t q0, const Weight& w, const float* bias,
                 float* y) {
  const int64_t k = w.cols;
  const void* panel[P];
  for (int q = 0; q < P; ++q) panel[q] = PanelPtr<kType>(w, q0 + q);
  const float* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = x + (i0 + r) * k;
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < P; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    if constexpr (R <= 2) {
      // Few rows: the tile streams weights faster than it computes, so ask
      // for them ahead of time (kPrefetchRows input positions ahead).
      if ((p & 1) == 0) {
        for (int q = 0; q < P; ++q) {
          _mm_prefetch(static_cast<const char*>(panel[q]) +
                           (p + kPrefetchRows) * kPanelRows * (kType == DType::kF32 ? 4 : 2),
                       _MM_HINT_T0);
        }
      }
    }
    __m512 wv[P];
    for (int q = 0; q < P; ++q) wv[q] = LoadPanelRow<kType>(panel[q], p);
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_set1_ps(xr[r][p]);
      for (int q = 0; q < P; ++q) acc[r][q] = _mm512_fmadd_ps(xv, wv[q], acc[r][q]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < P; ++q) StorePanelOutputs(acc[r][q], i0 + r, q0 + q, w, bias, y);
  }
}

// All P-wide panel groups of [q0, q1) for R rows, then the leftover panels.
template <DType kType, int R, int P>
inline void RowTile(const float* x, int64_t i0, int64_t q0, int64_t q1, const Weight& w,
                    const float* bias, float* y) {
  int64_t q = q0;
  for (; q + P <= q1; q += P) Tile<kType, R, P>(x, i0, q, w, bias, y);
  for (; q < q1; ++q) Tile<kType, R, 1>(x, i0, q, w, bias, y);
}

template <DType kType>
void LinearTyped(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                 int64_t panel_begin, int64_t panel_end) {
  // Panel blocks small enough to stay in L2 while every row tile passes.
  const int64_t panel_bytes = w.cols * kPanelRows * (kType == DType::kF32 ? 4 : 2);
  const int64_t block = std::max<int64_t>(4, (768 * 1024) / panel_bytes);
  for (int64_t q0 = panel_begin; q0 < panel_end; q0 += block) {
    const int64_t q1 = std::min(panel_end, q0 + block);
    ForEachRowTile(n, [&](int64_t i, int64_t rows) {
      switch (rows) {
        case 6: return RowTile<kType, 6, 4>(x, i, q0, q1, w, bias, y);
        case 5: return RowTile<kType, 5, 4>(x, i, q0, q1, w, bias, y);
        case 4: return RowTile<kType, 4, 4>(x, i, q0, q1, w, bias, y);
        case 3: return RowTile<kType, 3, 4>(x, i, q0, q1, w, bias, y);
        case 2: return RowTile<kType, 2, 4>(x, i, q0, q1, w, bias, y);
        default: return RowTile<kType, 1, 4>(x, i, q0, q1, w, bias, y);
      }
    });
  }
}

}  // namespace

void LinearAvx512(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                  int64_t panel_begin, int64_t panel_end) {
  switch (w.dtype) {
    case DType::kF32:
      return LinearTyped<DType::kF32>(x, n, w, bias, y, panel_begin, panel_end);
    case DType::kF16:
      return LinearTyped<DType::kF16>(x, n, w, bias, y, panel_begin, panel_end);
    case DType::kBF16:
      return LinearTyped<DType::kBF16>(x, n, w, bias, y, panel_begin, panel_end);
    default:  // quantized weights take the quantized kernels
      return;
  }
}

}  // namespace tessera::cpu

TESSERA_ISA_END
