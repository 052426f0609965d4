#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/backend/cpu/kernels.h"
#include "engine/backend/cpu/quant_linear.h"
#include "engine/model/float16.h"
#include "engine/util/thread_pool.h"
#include "spdlog/spdlog.h"

namespace tessera::cpu {
namespace {

float LoadElement(const void* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(data)[index];
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[index]);
    case DType::kBF16:
      return Bf16ToFloat(static_cast<const uint16_t*>(data)[index]);
  }
  return 0.0f;
}

// Position of logical element (row j, col p) in the packed layout.
int64_t PackedIndex(int64_t cols, int64_t j, int64_t p) {
  return (j / kPanelRows) * cols * kPanelRows + p * kPanelRows + j % kPanelRows;
}

}  // namespace

int64_t NumPanels(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows; }

size_t PackedWeightBytes(DType dtype, int64_t rows, int64_t cols) {
  return static_cast<size_t>(NumPanels(rows) * kPanelRows * cols) * DTypeSize(dtype);
}

void PackWeight(const void* row_major, const Weight& dst, ThreadPool& pool) {
  const size_t elem = DTypeSize(dst.dtype);
  const auto* src = static_cast<const uint8_t*>(row_major);
  auto* out = static_cast<uint8_t*>(const_cast<void*>(dst.data));
  pool.ParallelFor(NumPanels(dst.rows), 1, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      uint8_t* panel = out + static_cast<size_t>(q * dst.cols * kPanelRows) * elem;
      std::memset(panel, 0, static_cast<size_t>(dst.cols * kPanelRows) * elem);
      for (int64_t l = 0; l < kPanelRows && q * kPanelRows + l < dst.rows; ++l) {
        const uint8_t* row = src + static_cast<size_t>((q * kPanelRows + l) * dst.cols) * elem;
        for (int64_t p = 0; p < dst.cols; ++p) {
          std::memcpy(panel + static_cast<size_t>(p * kPanelRows + l) * elem, row + p * elem, elem);
        }
      }
    }
  });
}

// Position of logical element (row j, col p) in the AMX layout: panel
// j / 16, chunk p / 32, input pair (p % 32) / 2, output j % 16, half p % 2.
int64_t AmxIndex(int64_t cols, int64_t j, int64_t p) {
  const int64_t chunks = AmxPaddedCols(cols) / 32;
  return (((j / kPanelRows) * chunks + p / 32) * 16 + (p % 32) / 2) * 32 + (j % kPanelRows) * 2 +
         p % 2;
}

// Element i of row-major quantized blocks: its block, dequantized.
float QuantElement(const Weight& w, int64_t i) {
  const quant::QuantType type = QuantTypeOf(w.dtype);
  const int64_t block = quant::Info(type).block_elems;
  const int64_t j = i / w.cols, p = i % w.cols;
  float values[256];
  quant::DequantizeRow(type,
                       static_cast<const uint8_t*>(w.data) + j * DTypeRowBytes(w.dtype, w.cols) +
                           p / block * quant::Info(type).block_bytes,
                       values, block);
  return values[p % block];
}

float WeightAt(const Weight& w, int64_t i) {
  const int64_t j = i / std::max<int64_t>(1, w.cols), p = i % std::max<int64_t>(1, w.cols);
  switch (w.layout) {
    case WeightLayout::kRowMajor:
      return IsQuantized(w.dtype) ? QuantElement(w, i) : LoadElement(w.data, w.dtype, i);
    case WeightLayout::kQuantTiles:
      return QuantTileAt(w, j, p);
    case WeightLayout::kPanels:
      return LoadElement(w.data, w.dtype, PackedIndex(w.cols, j, p));
    case WeightLayout::kAmx:
      return LoadElement(w.data, DType::kBF16, AmxIndex(w.cols, j, p));
  }
  return 0.0f;
}

size_t AmxPackedBytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(NumPanels(rows) * (AmxPaddedCols(cols) / 32)) * kAmxChunkBytes;
}

void PackWeightAmx(const void* row_major, DType src_dtype, const Weight& dst, ThreadPool& pool) {
  auto* out = static_cast<uint16_t*>(const_cast<void*>(dst.data));
  const int64_t per_panel = AmxPaddedCols(dst.cols) * kPanelRows;  // bf16 elements
  pool.ParallelFor(NumPanels(dst.rows), 1, [&](int64_t q0, int64_t q1) {
    std::memset(out + q0 * per_panel, 0, static_cast<size_t>((q1 - q0) * per_panel) * 2);
    for (int64_t j = q0 * kPanelRows; j < std::min(dst.rows, q1 * kPanelRows); ++j) {
      for (int64_t p = 0; p < dst.cols; ++p) {
        out[AmxIndex(dst.cols, j, p)] =
            FloatToBf16(LoadElement(row_major, src_dtype, j * dst.cols + p));
      }
    }
  });
}

void LinearPortable(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                    int64_t panel_begin, int64_t panel_end) {
  const int64_t k = w.cols;
  const int64_t j_end = std::min(w.rows, panel_end * kPanelRows);
  // (Only for the f32 layouts; AMX weights go through LinearAmx.)
  for (int64_t j = panel_begin * kPanelRows; j < j_end; ++j) {
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * WeightAt(w, j * k + p);
      y[i * w.rows + j] = acc + (bias ? bias[j] : 0.0f);
    }
  }
}

bool CpuHasAvx512Kernels() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }();
  return yes;
}

bool CpuHasAvx2Kernels() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }();
  return yes;
}

const char* KernelPathName(CpuKernelPath path) {
  switch (path) {
    case CpuKernelPath::kPortable:
      return "portable";
    case CpuKernelPath::kAvx2:
      return "avx2";
    case CpuKernelPath::kAvx512:
      return "avx512";
  }
  return "?";
}

namespace {

CpuKernelPath BestPath() {
  if (CpuHasAvx512Kernels()) return CpuKernelPath::kAvx512;
  if (CpuHasAvx2Kernels()) return CpuKernelPath::kAvx2;
  return CpuKernelPath::kPortable;
}

CpuKernelPath ChoosePath() {
  const char* env = std::getenv("TESSERA_CPU_KERNEL");
  const std::string want = env ? env : "auto";
  const CpuKernelPath best = BestPath();
  if (want == "auto" || want.empty()) return best;
  for (CpuKernelPath p : {CpuKernelPath::kPortable, CpuKernelPath::kAvx2, CpuKernelPath::kAvx512}) {
    if (want != KernelPathName(p)) continue;
    if (p <= best) return p;
    spdlog::warn("TESSERA_CPU_KERNEL={}: this CPU cannot run it; using {}", want,
                 KernelPathName(best));
    return best;
  }
  spdlog::warn("TESSERA_CPU_KERNEL={} is not portable, avx2, avx512 or auto; using {}", want,
               KernelPathName(best));
  return best;
}

}  // namespace

CpuKernelPath SelectedKernelPath() {
  static const CpuKernelPath path = ChoosePath();
  return path;
}

LinearKernel SelectLinearKernel() {
  return SelectedKernelPath() == CpuKernelPath::kAvx512 ? &LinearAvx512 : &LinearPortable;
}

const char* LinearKernelName() {
  return SelectLinearKernel() == &LinearAvx512 ? "avx512" : "portable";
}

QuantLinearKernel SelectQuantLinearKernel() {
  return SelectedKernelPath() == CpuKernelPath::kPortable ? &QuantLinearPortable
                                                          : &QuantLinearAvx2;
}

const char* QuantLinearKernelName() {
  return SelectQuantLinearKernel() == &QuantLinearAvx2 ? "avx2" : "portable";
}

}  // namespace tessera::cpu
