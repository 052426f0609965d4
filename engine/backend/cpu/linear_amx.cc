// AMX-BF16 linear kernel (--cpu-matmul bf16, level amx), built for
// AMX-TILE and AMX-BF16 and used only when the CPU has AMX and the kernel
// grants the process the tile state.
//
// Weights are packed per panel of 16 outputs and per chunk of 32 inputs as
// the B operand of TDPBF16PS: 16 rows of input pairs × 16 outputs × 2
// (kAmxChunkBytes per chunk). Activations are rounded to bf16 once per call.
// Each output accumulates in f32 over the chunks in input order; a row's
// result does not depend on the other rows of its tile, so outputs do not
// depend on the batch.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"
#include "engine/model/float16.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AMX)

#include "engine/backend/cpu/amx_tiles.h"

namespace tessera::cpu {
namespace {

constexpr int64_t kPrefetchChunks = 2;

// Tiles 0-3: C (m × 16 f32); 4: A (m × 32 bf16); 5-7: B (16 × 32 bf16).
void ConfigureTiles(int m) {
  TileConfig cfg;
  for (int t = 0; t < 5; ++t) {
    cfg.rows[t] = static_cast<uint8_t>(m);
    cfg.colsb[t] = 64;
  }
  for (int t = 5; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  LoadTileConfig(cfg);
}

// Writes rows [i0, i0 + m) of panel q from a C tile in `c` (16 × 16 f32).
void StoreTile(const float* c, int m, int64_t i0, int64_t q, const Weight& w, const float* bias,
               float* y) {
  const int64_t j0 = q * kPanelRows;
  const int64_t valid = std::min<int64_t>(kPanelRows, w.rows - j0);
  const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
  const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + j0) : _mm512_setzero_ps();
  for (int r = 0; r < m; ++r) {
    _mm512_mask_storeu_ps(y + (i0 + r) * w.rows + j0, mask,
                          _mm512_add_ps(_mm512_loadu_ps(c + r * 16), b));
  }
}

// NP panels (q .. q + NP) for the m rows at i0.
template <int NP>
void PanelGroup(const uint16_t* xb, int64_t k_pad, int m, int64_t i0, int64_t q, const Weight& w,
                const float* bias, float* y) {
  const int64_t chunks = k_pad / 32;
  const auto* panels = static_cast<const uint8_t*>(w.data);
  auto b_ptr = [&](int p, int64_t c) {
    return panels + ((q + p) * chunks + c) * kAmxChunkBytes;
  };
  _tile_zero(0);
  if constexpr (NP > 1) _tile_zero(1);
  if constexpr (NP > 2) _tile_zero(2);
  if constexpr (NP > 3) _tile_zero(3);
  for (int64_t c = 0; c < chunks; ++c) {
    if (c + kPrefetchChunks < chunks) {
      // Decode batches (up to a few tiles of rows) are bound by streaming
      // the weights from DRAM: asking for the tiles a few chunks ahead lets
      // the loads overlap the tile products (~10% per step at 16 rows).
      for (int p = 0; p < NP; ++p) {
        const char* ahead = reinterpret_cast<const char*>(b_ptr(p, c + kPrefetchChunks));
        for (int64_t line = 0; line < kAmxChunkBytes; line += 64) {
          _mm_prefetch(ahead + line, _MM_HINT_T0);
        }
      }
    }
    _tile_loadd(4, xb + i0 * k_pad + c * 32, k_pad * 2);
    _tile_loadd(5, b_ptr(0, c), 64);
    _tile_dpbf16ps(0, 4, 5);
    if constexpr (NP > 1) {
      _tile_loadd(6, b_ptr(1, c), 64);
      _tile_dpbf16ps(1, 4, 6);
    }
    if constexpr (NP > 2) {
      _tile_loadd(7, b_ptr(2, c), 64);
      _tile_dpbf16ps(2, 4, 7);
    }
    if constexpr (NP > 3) {
      _tile_loadd(5, b_ptr(3, c), 64);
      _tile_dpbf16ps(3, 4, 5);
    }
  }
  alignas(64) float cbuf[16 * 16];
  _tile_stored(0, cbuf, 64);
  StoreTile(cbuf, m, i0, q, w, bias, y);
  if constexpr (NP > 1) {
    _tile_stored(1, cbuf, 64);
    StoreTile(cbuf, m, i0, q + 1, w, bias, y);
  }
  if constexpr (NP > 2) {
    _tile_stored(2, cbuf, 64);
    StoreTile(cbuf, m, i0, q + 2, w, bias, y);
  }
  if constexpr (NP > 3) {
    _tile_stored(3, cbuf, 64);
    StoreTile(cbuf, m, i0, q + 3, w, bias, y);
  }
}

}  // namespace

void LinearAmx(const uint16_t* xb, int64_t k_pad, int64_t n, const Weight& w, const float* bias,
               float* y, int64_t panel_begin, int64_t panel_end) {
  // Panel groups outside, row blocks inside: a group's weights (4 panels ×
  // k_pad / 32 tiles of 1 KiB) stay in L2 while every row block uses them.
  int configured = -1;
  for (int64_t q = panel_begin; q < panel_end; q += 4) {
    const int64_t np = std::min<int64_t>(4, panel_end - q);
    for (int64_t i0 = 0; i0 < n; i0 += 16) {
      const int m = static_cast<int>(std::min<int64_t>(16, n - i0));
      if (m != configured) {
        ConfigureTiles(m);
        configured = m;
      }
      switch (np) {
        case 4: PanelGroup<4>(xb, k_pad, m, i0, q, w, bias, y); break;
        case 3: PanelGroup<3>(xb, k_pad, m, i0, q, w, bias, y); break;
        case 2: PanelGroup<2>(xb, k_pad, m, i0, q, w, bias, y); break;
        default: PanelGroup<1>(xb, k_pad, m, i0, q, w, bias, y); break;
      }
    }
  }
  _tile_release();
}

}  // namespace tessera::cpu

TESSERA_ISA_END
