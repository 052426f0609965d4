// AVX2 linear kernel over panel-packed weights (kernels.h), for CPUs without
// AVX-512; built for AVX2, FMA and F16C and selected at run time.
//
// A panel row (16 outputs of one input position) is two 8-lane registers. A
// tile of R rows keeps 2·R accumulators; per input position it loads the two
// halves, broadcasts R inputs and issues 2·R FMAs. Lane l sums x[i, p]·w[j, p]
// over p in order whatever the tile, so a row's outputs do not depend on the
// batch.
//
// f16 and bf16 weights: a tile widens each weight as it loads it. With more
// rows than one tile holds, that would repeat for every tile and cost about
// a third of the FMA rate (vcvtph2ps takes the FMA pipes' slots on some
// cores), so the first tile of a panel also stores the widened panel in
// per-thread scratch (it stays in L2) and the other tiles read that.
// Widening is exact, so both ways give the same bits.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX2)

namespace tessera::cpu {
namespace {

constexpr int64_t kPrefetchRows = 64;

template <DType kType>
inline __m256 LoadHalf(const void* panel, int64_t p, int half) {
  const int64_t offset = p * kPanelRows + 8 * half;
  if constexpr (kType == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(panel) + offset);
  } else {
    const __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(panel) + offset));
    if constexpr (kType == DType::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

template <DType kType>
constexpr int64_t ElemBytes() {
  return kType == DType::kF32 ? 4 : 2;
}

inline void StoreOutputs(__m256 lo, __m256 hi, int64_t i, int64_t q, const Weight& w,
                         const float* bias, float* y) {
  alignas(32) float out[kPanelRows];
  _mm256_store_ps(out, lo);
  _mm256_store_ps(out + 8, hi);
  const int64_t j0 = q * kPanelRows;
  const int64_t valid = std::min<int64_t>(kPanelRows, w.rows - j0);
  for (int64_t l = 0; l < valid; ++l) {
    y[i * w.rows + j0 + l] = out[l] + (bias ? bias[j0 + l] : 0.0f);
  }
}

// Rows [i0, i0 + R) × panel q, whose k · 16 elements of kType are at panel.
// With kWiden, it also stores the panel as f32 at wide (p · 16 + l).
template <DType kType, int R, bool kWiden = false>
void Tile(const float* x, int64_t i0, int64_t q, const void* panel_data, const Weight& w,
          const float* bias, float* y, float* wide = nullptr) {
  const int64_t k = w.cols;
  const auto* panel = static_cast<const uint8_t*>(panel_data);
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    if constexpr (R <= 2) {
      if ((p & 1) == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(panel) +
                         (p + kPrefetchRows) * kPanelRows * ElemBytes<kType>(),
                     _MM_HINT_T0);
      }
    }
    const __m256 lo = LoadHalf<kType>(panel, p, 0), hi = LoadHalf<kType>(panel, p, 1);
    if constexpr (kWiden) {
      _mm256_storeu_ps(wide + p * kPanelRows, lo);
      _mm256_storeu_ps(wide + p * kPanelRows + 8, hi);
    }
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_set1_ps(x[(i0 + r) * k + p]);
      acc[r][0] = _mm256_fmadd_ps(xv, lo, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(xv, hi, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) StoreOutputs(acc[r][0], acc[r][1], i0 + r, q, w, bias, y);
}

// Rows [i, i + rows) × panel q for rows in [1, 6].
template <DType kType, bool kWiden>
void TileOf(int64_t rows, const float* x, int64_t i, int64_t q, const void* panel,
            const Weight& w, const float* bias, float* y, float* wide) {
  switch (rows) {
    case 6: return Tile<kType, 6, kWiden>(x, i, q, panel, w, bias, y, wide);
    case 5: return Tile<kType, 5, kWiden>(x, i, q, panel, w, bias, y, wide);
    case 4: return Tile<kType, 4, kWiden>(x, i, q, panel, w, bias, y, wide);
    case 3: return Tile<kType, 3, kWiden>(x, i, q, panel, w, bias, y, wide);
    case 2: return Tile<kType, 2, kWiden>(x, i, q, panel, w, bias, y, wide);
    default: return Tile<kType, 1, kWiden>(x, i, q, panel, w, bias, y, wide);
  }
}

// All n rows × panel q, read as kType from panel, in tiles of up to 6 rows
// (12 accumulators, two weight registers and a broadcast). With wide
// (scratch for k · 16 floats), the first tile widens the panel into it and
// the others read that.
template <DType kType>
void PanelRows(const float* x, int64_t n, int64_t q, const void* panel, const Weight& w,
               const float* bias, float* y, float* wide) {
  bool first = true;
  ForEachRowTile(n, [&](int64_t i, int64_t rows) {
    if constexpr (kType == DType::kF32) {
      TileOf<kType, false>(rows, x, i, q, panel, w, bias, y, nullptr);
    } else if (wide == nullptr) {
      TileOf<kType, false>(rows, x, i, q, panel, w, bias, y, nullptr);
    } else if (first) {
      first = false;
      TileOf<kType, true>(rows, x, i, q, panel, w, bias, y, wide);
    } else {
      TileOf<DType::kF32, false>(rows, x, i, q, wide, w, bias, y, nullptr);
    }
  });
}

// Per-thread scratch for one panel of k inputs widened to f32. std::vector is
// defined outside the instruction-set region, so its growth code stays
// baseline x86-64 (isa_target.h).
float* WidePanelScratch(int64_t k) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < size_t(k) * kPanelRows) scratch.resize(size_t(k) * kPanelRows);
  return scratch.data();
}

template <DType kType>
void LinearTyped(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                 int64_t panel_begin, int64_t panel_end) {
  const int64_t panel_bytes = w.cols * kPanelRows * ElemBytes<kType>();
  const auto* base = static_cast<const uint8_t*>(w.data);
  float* wide = kType != DType::kF32 && n > 6 ? WidePanelScratch(w.cols) : nullptr;
  for (int64_t q = panel_begin; q < panel_end; ++q) {
    PanelRows<kType>(x, n, q, base + q * panel_bytes, w, bias, y, wide);
  }
}

}  // namespace

void LinearAvx2(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                int64_t panel_begin, int64_t panel_end) {
  switch (w.dtype) {
    case DType::kF16:
      return LinearTyped<DType::kF16>(x, n, w, bias, y, panel_begin, panel_end);
    case DType::kBF16:
      return LinearTyped<DType::kBF16>(x, n, w, bias, y, panel_begin, panel_end);
    default:
      return LinearTyped<DType::kF32>(x, n, w, bias, y, panel_begin, panel_end);
  }
}

}  // namespace tessera::cpu

TESSERA_ISA_END
