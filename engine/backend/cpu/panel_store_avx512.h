// Shared by the AVX-512 panel kernels (linear_avx512.cc and
// linear_bf16_avx512.cc, built with the same AVX-512 flags).
#pragma once

#include <immintrin.h>

#include <algorithm>

#include "engine/backend/cpu/kernels.h"

namespace tessera::cpu {

// Writes the 16 outputs of row i for panel q (fewer for the last, partial
// panel), plus the bias when there is one.
inline void StorePanelOutputs(__m512 acc, int64_t i, int64_t q, const Weight& w,
                              const float* bias, float* y) {
  const int64_t j0 = q * kPanelRows;
  const int64_t valid = std::min<int64_t>(kPanelRows, w.rows - j0);
  const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
  if (bias) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(mask, bias + j0));
  _mm512_mask_storeu_ps(y + i * w.rows + j0, mask, acc);
}

}  // namespace tessera::cpu
