// CPU kernels shared by the CPU backend.
//
// Linear weights are packed at load time into panels of 16 output rows:
// panel q holds rows [16q, 16q + 16) as [cols][16], so element (row j, col p)
// sits at q·cols·16 + p·16 + (j mod 16); rows past the end are zero. A
// kernel then streams one panel with unit stride and keeps 16 outputs of a
// row in one vector register, accumulating over p in input order. Every
// output element is computed by one thread in that fixed order, whatever the
// batch, the tile shape or the thread split.
#pragma once

#include <cstdint>

#include "engine/backend/backend.h"

namespace tessera {
class ThreadPool;
}

namespace tessera::cpu {

constexpr int64_t kPanelRows = 16;

// Calls f(i, rows) for row tiles [i, i + rows) of at most 6 rows covering
// [0, n). A remainder of 1 to 3 rows after full tiles is shared with the
// last of them (7 = 4 + 3, 8 = 4 + 4, 9 = 5 + 4): a tile of one or two rows
// reads a panel's weights for a fraction of the arithmetic. A row's outputs
// do not depend on its tile. Always inlined, so that a kernel's lambda is
// inlined into the kernel (isa_target.h).
template <typename F>
[[gnu::always_inline]] inline void ForEachRowTile(int64_t n, F&& f) {
  const int64_t rest = n % 6;
  const int64_t full_end = rest != 0 && rest < 4 && n > 6 ? n - 6 - rest : n - rest;
  int64_t i = 0;
  for (; i < full_end; i += 6) f(i, 6);
  const int64_t left = n - i;
  if (left > 6) {
    f(i, (left + 1) / 2);
    f(i + (left + 1) / 2, left / 2);
  } else if (left > 0) {
    f(i, left);
  }
}

// Packs the full panel of 16 rows of 32-bit elements at `rows` (row
// stride `cols`) into `panel` (column p's 16 values at p · 16) for the
// columns [0, cols rounded down to 16), and returns that count (AVX-512:
// pack_avx512.cc; the caller packs the rest).
int64_t PackFullPanel32Avx512(const uint32_t* rows, int64_t cols, uint32_t* panel);

int64_t NumPanels(int64_t rows);
size_t PackedWeightBytes(DType dtype, int64_t rows, int64_t cols);
// Copies a row-major [rows, cols] matrix of `dst.dtype` into dst's panels,
// reading its rows from `source` when that names a file.
void PackWeight(const void* row_major, const Weight& dst, ThreadPool& pool,
                FileRange source = {});

// y[i, 16q + l] = dot(x[i, :], w[16q + l, :]) (+ bias) for i in [0, n) and
// panels q in [panel_begin, panel_end). x: [n, w.cols]; y: [n, w.rows].
using LinearKernel = void (*)(const float* x, int64_t n, const Weight& w, const float* bias,
                              float* y, int64_t panel_begin, int64_t panel_end);

void LinearPortable(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                    int64_t panel_begin, int64_t panel_end);
void LinearAvx512(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                  int64_t panel_begin, int64_t panel_end);
void LinearAvx2(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                int64_t panel_begin, int64_t panel_end);

// True when this CPU runs the *_avx512.cc kernels (AVX-512 F/BW/VL/DQ, FMA
// and F16C, with the OS saving their state; cpu_features.cc). Every AVX-512
// path asks this.
bool CpuHasAvx512Kernels();
bool CpuHasAvx2Kernels();  // AVX2, FMA and F16C
bool CpuHasAvxVnni();      // CpuHasAvx2Kernels() and AVX-VNNI
bool CpuHasAvx512Vnni();   // CpuHasAvx512Kernels() and AVX512-VNNI
bool CpuHasGfni();         // GFNI, whatever the environment asks
// Whether the AVX512-VNNI quantized kernel is the build that takes the high
// nibbles of 4-bit values with GFNI (one operation for a shift and a mask).
// By default, where the CPU has GFNI, on Intel CPUs only: on a 2-core AMD
// EPYC (Zen 4) the shift and the mask, which run beside vpdpbusd, made Q4_K
// products of 8 and 16 rows 1.07x faster (BM_QuantKernel/4/0/{8,16}, one
// thread, medians of 5 alternations). The environment variable
// TESSERA_CPU_GFNI (0 or 1) chooses. Checked once.
bool UseGfniKernel();
// How the AVX512-VNNI quantized kernel asks for weights before it reads
// them (software prefetch):
//   kOff        never: the hardware prefetchers alone;
//   kAhead      2 KiB ahead in each tile, in passes of one or two rows. The
//               default on Intel CPUs: a Xeon with AMX decoded a 1.1B
//               Q4_K_M model 1.15x faster with it;
//   kNextTiles  the next pass's tiles into L2, while the last rows of the
//               current pass are computed. The default elsewhere: on a
//               2-core AMD EPYC (Zen 4) it made one-row Q4_K products of a
//               matrix larger than the cache 1.38x faster than kOff and
//               served Q4_K_M decoding of one stream 1.23x (docs/
//               PERFORMANCE.md), where kAhead had been slower than kOff.
// The environment variable TESSERA_CPU_QUANT_PREFETCH (off, ahead or next;
// 0 and 1 for off and ahead) sets it; SetQuantWeightPrefetch too (tests and
// benchmarks).
enum class QuantPrefetch { kOff, kAhead, kNextTiles };
QuantPrefetch QuantWeightPrefetch();
void SetQuantWeightPrefetch(QuantPrefetch mode);
// Whether the AVX512-VNNI kernel takes Q6_K products of 8 rows or more in
// passes of two pairs of tiles and 8 rows, in place of three pairs and 4
// rows: a group's weight work (loads, sign flips, scales) then serves 8
// rows. On a 2-core AMD EPYC of the Zen 5 generation, Q6_K products of 8,
// 16 and 32 rows ran 1.20-1.25x faster (docs/PERFORMANCE.md); other CPUs
// were not measured. On by default; the environment variable
// TESSERA_CPU_QUANT_8ROWS (0 or 1) sets it, SetQuantEightRowPasses too
// (tests and benchmarks). The outputs have the same bits either way.
bool QuantEightRowPasses();
void SetQuantEightRowPasses(bool on);

// Whether decode attention asks for each (sequence, head) item's values and
// the next item's keys before the item runs (attention_kernels.h,
// kItemPrefetchBytes):
//   kAuto  when the step's KV cache (every layer) is larger than the
//          last-level cache, so that it comes from memory: where it stays
//          in cache, the prefetch instructions only cost (a cached
//          16-sequence, 128-token layer ran 0.88x as fast with them);
//   kOff, kOn  never, always.
// TESSERA_CPU_KV_PREFETCH (0 or 1) sets it; SetKvItemPrefetch too.
enum class KvItemPrefetch { kAuto, kOff, kOn };
void SetKvItemPrefetch(KvItemPrefetch mode);
bool UseKvItemPrefetch(int64_t step_kv_bytes);
// The size of the largest data cache the CPU reports (32 MiB when it
// reports none).
int64_t LastLevelCacheBytes();

// The kernel levels of the CPU backend, each a set of kernels that a family
// of CPUs runs (and the requirement of each):
//   portable     plain C++, any x86-64;
//   avx2         AVX2 + FMA + F16C: f32 FMAs, int8 products with vpmaddubsw;
//   avx-vnni     avx2 with AVX-VNNI: int8 products with the VEX vpdpbusd;
//   avx512       AVX-512 F/BW/VL: f32 FMAs 16 wide, int8 products as avx2;
//   avx512-vnni  avx512 with AVX512-VNNI: int8 products 16 rows at a time;
//   avx512-bf16  avx512-vnni with AVX512-BF16: 16-bit models' products in
//                bf16 with vdpbf16ps (--cpu-matmul bf16);
//   amx          avx512 with AMX-BF16 tiles for those products.
// The best level the CPU supports is used, unless the environment variable
// TESSERA_CPU_KERNEL names one (or "auto"), so that one machine can test
// every level it can execute. A forced level the CPU lacks falls back to the
// best one it has, with a warning. Checked once.
enum class CpuKernelLevel { kPortable, kAvx2, kAvxVnni, kAvx512, kAvx512Vnni, kAvx512Bf16, kAmx };
constexpr CpuKernelLevel kAllKernelLevels[] = {
    CpuKernelLevel::kPortable,   CpuKernelLevel::kAvx2,       CpuKernelLevel::kAvxVnni,
    CpuKernelLevel::kAvx512,     CpuKernelLevel::kAvx512Vnni, CpuKernelLevel::kAvx512Bf16,
    CpuKernelLevel::kAmx};
bool CpuSupportsLevel(CpuKernelLevel level);
CpuKernelLevel SelectedKernelLevel();
const char* KernelLevelName(CpuKernelLevel level);

// The vector ISA of the float kernels (linear, attention, activations) of the
// selected level.
enum class CpuKernelPath { kPortable, kAvx2, kAvx512 };
CpuKernelPath PathOfLevel(CpuKernelLevel level);
CpuKernelPath SelectedKernelPath();
const char* KernelPathName(CpuKernelPath path);

// The f32/f16/bf16 panel kernel of the selected path.
LinearKernel SelectLinearKernel();
const char* LinearKernelName();

// Activations with a polynomial e^x (relative error ~2e-7 against expf), 16
// lanes at a time (AVX-512F) or 8 (AVX2 + FMA), for i in [0, count):
//   SwiGlu: out[i] = silu(gate[i]) · up[i];
//   Gelu:   x[i] = gelu_tanh(x[i]), computed as x·sigmoid(2·√(2/π)·(x + 0.044715·x³));
//   GeGlu:  out[i] = gelu_tanh(gate[i]) · up[i].
// Non-finite inputs give what the scalar formulas give.
void SwiGluAvx512(const float* gate, const float* up, int64_t count, float* out);
void GeluAvx512(float* x, int64_t count);
void GeGluAvx512(const float* gate, const float* up, int64_t count, float* out);
void SwiGluAvx2(const float* gate, const float* up, int64_t count, float* out);
void GeluAvx2(float* x, int64_t count);
void GeGluAvx2(const float* gate, const float* up, int64_t count, float* out);

// Element i of a weight's logical row-major [rows, cols] view, as f32 (for
// quantized weights, the block's value).
float WeightAt(const Weight& w, int64_t i);

// --- bf16 products (--cpu-matmul bf16): AMX-BF16 (linear_amx.cc) or
// AVX512-BF16 (linear_bf16_avx512.cc), on the same packed weights ---
// Weights are packed per panel of 16 outputs and per chunk of 32 inputs:
// 16 input pairs × 16 outputs × 2 bf16, i.e. TDPBF16PS's B tile, whose
// rows are also vdpbf16ps's operand (WeightLayout::kAmx).
constexpr int64_t kAmxChunkBytes = 1024;
// True when the CPU has AMX-BF16 and the process may use the tile state.
bool AmxAvailable();
// True when the CPU has AVX512-BF16 (with the AVX-512 kernels' features).
bool CpuHasAvx512Bf16();
// Inputs rounded up to whole chunks of 32.
inline int64_t AmxPaddedCols(int64_t cols) { return (cols + 31) / 32 * 32; }
size_t AmxPackedBytes(int64_t rows, int64_t cols);
// Packs a row-major [rows, cols] matrix of `src_dtype` into bf16 chunks
// (rows read from `source` when that names a file).
void PackWeightAmx(const void* row_major, DType src_dtype, const Weight& dst, ThreadPool& pool,
                   FileRange source = {});
// y = x · wᵀ (+ bias) for panels [panel_begin, panel_end), with x already in
// bf16 as [n, k_pad] (k_pad = AmxPaddedCols(w.cols), zero-padded). Each
// output accumulates in f32 over the input pairs in order, whatever n.
using Bf16LinearKernel = void (*)(const uint16_t* x_bf16, int64_t k_pad, int64_t n,
                                  const Weight& w, const float* bias, float* y,
                                  int64_t panel_begin, int64_t panel_end);
void LinearAmx(const uint16_t* x_bf16, int64_t k_pad, int64_t n, const Weight& w,
               const float* bias, float* y, int64_t panel_begin, int64_t panel_end);
void LinearAvx512Bf16(const uint16_t* x_bf16, int64_t k_pad, int64_t n, const Weight& w,
                      const float* bias, float* y, int64_t panel_begin, int64_t panel_end);
// The bf16 kernel of the selected level (avx512-bf16 or amx); nullptr below
// those levels, where --cpu-matmul bf16 is refused.
Bf16LinearKernel SelectBf16LinearKernel();
const char* Bf16LinearKernelName();
// out[n, k_pad] = bf16(x[n, k]) (round to nearest even), zero-padded.
void RowsToBf16Avx512(const float* x, int64_t n, int64_t k, int64_t k_pad, uint16_t* out);

}  // namespace tessera::cpu
