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
// Products of at most this many rows run GroupMajor: from 1 to 24 rows (up
// to 4 row tiles), the first pass over a group would wait on memory.
constexpr int64_t kGroupMajorRows = 24;

// Rows [i0, i0 + R) × panels [q0, q0 + P). With PF > 0, while it reads
// input pair p it also asks for pair p of the PF panels at pf[] into the L2.
template <int R, int P, int PF = 0>
inline void Tile(const uint16_t* xb, int64_t k_pad, int64_t i0, int64_t q0, const Weight& w,
                 const float* bias, float* y, const uint8_t* const* pf = nullptr) {
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
    for (int f = 0; f < PF; ++f) {
      _mm_prefetch(reinterpret_cast<const char*>(pf[f] + p * kPairBytes), _MM_HINT_T1);
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

// Rows [i, i + rows) × the 4 panels from q0, asking for `count` of the
// panels at pf[] meanwhile.
template <int R>
inline void PrefetchingTile(const uint16_t* xb, int64_t k_pad, int64_t i, int64_t q0,
                            const Weight& w, const float* bias, float* y,
                            const uint8_t* const* pf, int count) {
  switch (count) {
    case 0: return Tile<R, 4, 0>(xb, k_pad, i, q0, w, bias, y, pf);
    case 1: return Tile<R, 4, 1>(xb, k_pad, i, q0, w, bias, y, pf);
    case 2: return Tile<R, 4, 2>(xb, k_pad, i, q0, w, bias, y, pf);
    default: return Tile<R, 4, 4>(xb, k_pad, i, q0, w, bias, y, pf);
  }
}

// Few rows (at most kGroupMajorRows): every row tile passes over a group of
// 4 panels before the next group, so the group is read from memory once and
// from the L2 after; meanwhile the row tiles ask for the next group (of the
// weight, past panel_end too), row tile t of T for panels t, t + T, ..., so
// that the next group comes from the L2 too and the memory streams while
// the products run.
void GroupMajor(const uint16_t* xb, int64_t k_pad, int64_t n, const Weight& w,
                const float* bias, float* y, int64_t panel_begin, int64_t panel_end) {
  const int64_t panel_bytes = k_pad / 2 * kPairBytes;
  int64_t tiles = 0;
  ForEachRowTile(n, [&](int64_t, int64_t) { ++tiles; });
  const int64_t panels = NumPanels(w.rows);
  int64_t q0 = panel_begin;
  for (; q0 + 4 <= panel_end; q0 += 4) {
    // The next group, past the range's end too: the pool hands a thread the
    // chunks of its share in order, so the panels after this range are
    // usually its next chunk's (BM_ModelProducts/0/16/0: 0.97x the time).
    const int64_t next = std::min<int64_t>(4, panels - (q0 + 4));  // q0 + 4 <= panel_end <= panels
    const uint8_t* base = static_cast<const uint8_t*>(w.data) + (q0 + 4) * panel_bytes;
    int64_t t = 0;
    ForEachRowTile(n, [&](int64_t i, int64_t rows) {
      const uint8_t* pf[4];
      int count = 0;
      for (int64_t q = t++; q < next; q += tiles) pf[count++] = base + q * panel_bytes;
      if (count == 3) pf[count++] = pf[2];  // Tile<R, 4, 4>
      switch (rows) {
        case 6: return PrefetchingTile<6>(xb, k_pad, i, q0, w, bias, y, pf, count);
        case 5: return PrefetchingTile<5>(xb, k_pad, i, q0, w, bias, y, pf, count);
        case 4: return PrefetchingTile<4>(xb, k_pad, i, q0, w, bias, y, pf, count);
        case 3: return PrefetchingTile<3>(xb, k_pad, i, q0, w, bias, y, pf, count);
        case 2: return PrefetchingTile<2>(xb, k_pad, i, q0, w, bias, y, pf, count);
        default: return PrefetchingTile<1>(xb, k_pad, i, q0, w, bias, y, pf, count);
      }
    });
  }
  for (; q0 < panel_end; ++q0) {
    ForEachRowTile(n, [&](int64_t i, int64_t rows) {
      switch (rows) {
        case 6: return Tile<6, 1>(xb, k_pad, i, q0, w, bias, y);
        case 5: return Tile<5, 1>(xb, k_pad, i, q0, w, bias, y);
        case 4: return Tile<4, 1>(xb, k_pad, i, q0, w, bias, y);
        case 3: return Tile<3, 1>(xb, k_pad, i, q0, w, bias, y);
        case 2: return Tile<2, 1>(xb, k_pad, i, q0, w, bias, y);
        default: return Tile<1, 1>(xb, k_pad, i, q0, w, bias, y);
      }
    });
  }
}

}  // namespace

void LinearAvx512Bf16(const uint16_t* xb, int64_t k_pad, int64_t n, const Weight& w,
                      const float* bias, float* y, int64_t panel_begin, int64_t panel_end) {
  if (n <= kGroupMajorRows) return GroupMajor(xb, k_pad, n, w, bias, y, panel_begin, panel_end);
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
