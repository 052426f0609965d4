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

int64_t NumPanels(int64_t rows);
size_t PackedWeightBytes(DType dtype, int64_t rows, int64_t cols);
// Copies a row-major [rows, cols] matrix of `dst.dtype` into dst's panels.
void PackWeight(const void* row_major, const Weight& dst, ThreadPool& pool);

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

// True when this CPU runs the *_avx512.cc kernels (AVX-512 F/BW/VL, FMA and
// F16C; checked once, at run time). Every AVX-512 path asks this.
bool CpuHasAvx512Kernels();

// Which kernel family the CPU backend runs: the fastest this CPU supports,
// unless the environment variable TESSERA_CPU_KERNEL forces one ("portable",
// "avx2" or "avx512"; "auto" or unset chooses), so that one machine can test
// every path it can execute. A forced path the CPU lacks falls back to the
// best one it has, with a warning. Checked once.
enum class CpuKernelPath { kPortable, kAvx2, kAvx512 };
CpuKernelPath SelectedKernelPath();
const char* KernelPathName(CpuKernelPath path);
bool CpuHasAvx2Kernels();  // AVX2 and FMA

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

// --- AMX-BF16 (see linear_amx.cc) ---
// One panel's B tile for 32 inputs: 16 input pairs × 16 outputs × 2 bf16.
constexpr int64_t kAmxChunkBytes = 1024;
// True when the CPU has AMX-BF16 and the process may use the tile state.
bool AmxAvailable();
// Inputs rounded up to whole chunks of 32.
inline int64_t AmxPaddedCols(int64_t cols) { return (cols + 31) / 32 * 32; }
size_t AmxPackedBytes(int64_t rows, int64_t cols);
// Packs a row-major [rows, cols] matrix of `src_dtype` into bf16 AMX tiles.
void PackWeightAmx(const void* row_major, DType src_dtype, const Weight& dst, ThreadPool& pool);
// y = x · wᵀ (+ bias) for panels [panel_begin, panel_end), with x already in
// bf16 as [n, k_pad] (k_pad = AmxPaddedCols(w.cols), zero-padded).
void LinearAmx(const uint16_t* x_bf16, int64_t k_pad, int64_t n, const Weight& w,
               const float* bias, float* y, int64_t panel_begin, int64_t panel_end);
// out[n, k_pad] = bf16(x[n, k]), zero-padded.
void RowsToBf16(const float* x, int64_t n, int64_t k, int64_t k_pad, uint16_t* out);

}  // namespace tessera::cpu
