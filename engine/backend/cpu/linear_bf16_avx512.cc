// AVX512-BF16 linear kernel (--cpu-matmul bf16 on CPUs without AMX),
// built for AVX-512 (AVX512-BF16 among it) and used only
// when the CPU has AVX512-BF16.
//
// It reads the weights packed for AMX (kernels.h): per panel of 16 outputs,
// one 64-byte row per input pair holding the 16 outputs' two bf16 weights,
// which is vdpbf16ps's operand as it stands. A tile of R rows × P panels
// keeps R·P accumulators of 16 outputs; per input pair it loads P weight
// rows, broadcasts R activation pairs and issues R·P vdpbf16ps (32
// multiply-adds each). Lane l of an accumulator adds its pairs in input
// order whatever the tile shape, so a row's outputs do not depend on the
// batch.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"
#include "engine/model/float16.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX512)

#include "engine/backend/cpu/panel_store_avx512.h"

// GCC 12's avx512fintrin.h builds some intrinsics on deliberately undefined
// registers and then warns about them.
namespace tessera::cpu {
namespace {

constexpr int64_t kPairBytes = kPanelRows * 2 * 2;  // one input pair of a panel
constexpr int64_t kPrefetchPairs = 32;

// Rows [i0, i0 + R) × panels [q0, q0 + P).
template <int R, int P>
inline void Tile(const uint16_t* xb, int64_t k_pad, int64_t i0, int64_t q0, const Weight& w,
                 const float* bias, float* y) {
  const int64_t pairs = k_pad / 2;
  const uint8_t* panel[P];
  for (int q = 0; q < P; ++q) {
    panel[q] = static_cast<const uint8_t*>(w.data) + (q0 + q) * pairs * kPairBytes;
  }
  const uint16_t* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = xb + (i0 + r) * k_pad;
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < P; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < pairs; ++p) {
    if constexpr (R <= 2) {
      // Few rows: the weights stream from memory faster than they are used.
      for (int q = 0; q < P; ++q) {
        _mm_prefetch(reinterpret_cast<const char*>(panel[q] + (p + kPrefetchPairs) * kPairBytes),
                     _MM_HINT_T0);
      }
    }
    __m512bh wv[P];
    for (int q = 0; q < P; ++q) {
      wv[q] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel[q] + p * kPairBytes));
    }
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, xr[r] + 2 * p, sizeof(pair));
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
      for (int q = 0; q < P; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], xv, wv[q]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < P; ++q) StorePanelOutputs(acc[r][q], i0 + r, q0 + q, w, bias, y);
  }
}

template <int R, int P>
inline void RowTile(const uint16_t* xb, int64_t k_pad, int64_t i0, int64_t q0, int64_t q1,
                    const Weight& w, const float* bias, float* y) {
  int64_t q = q0;
  for (; q + P <= q1; q += P) Tile<R, P>(xb, k_pad, i0, q, w, bias, y);
  for (; q < q1; ++q) Tile<R, 1>(xb, k_pad, i0, q, w, bias, y);
}

}  // namespace

void LinearAvx512Bf16(const uint16_t* xb, int64_t k_pad, int64_t n, const Weight& w,
                      const float* bias, float* y, int64_t panel_begin, int64_t panel_end) {
  // Panel blocks small enough to stay in L2 while every row tile passes.
  const int64_t panel_bytes = k_pad / 2 * kPairBytes;
  const int64_t block = std::max<int64_t>(4, (768 * 1024) / panel_bytes);
  for (int64_t q0 = panel_begin; q0 < panel_end; q0 += block) {
    const int64_t q1 = std::min(panel_end, q0 + block);
    ForEachRowTile(n, [&](int64_t i, int64_t rows) {
      switch (rows) {
        case 6: return RowTile<6, 4>(xb, k_pad, i, q0, q1, w, bias, y);
        case 5: return RowTile<5, 4>(xb, k_pad, i, q0, q1, w, bias, y);
        case 4: return RowTile<4, 4>(xb, k_pad, i, q0, q1, w, bias, y);
        case 3: return RowTile<3, 4>(xb, k_pad, i, q0, q1, w, bias, y);
        case 2: return RowTile<2, 4>(xb, k_pad, i, q0, q1, w, bias, y);
        default: return RowTile<1, 4>(xb, k_pad, i, q0, q1, w, bias, y);
      }
    });
  }
}

void RowsToBf16Avx512(const float* x, int64_t n, int64_t k, int64_t k_pad, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t c = 0;
    for (; c + 16 <= k; c += 16) {
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i * k + c));
      std::memcpy(out + i * k_pad + c, &h, 32);
    }
    for (; c < k_pad; ++c) {
      out[i * k_pad + c] = c < k ? FloatToBf16(x[i * k + c]) : 0;
    }
  }
}

}  // namespace tessera::cpu

TESSERA_ISA_END
