#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/backend/cpu/kernels.h"
#include "engine/backend/cpu/quant_linear.h"
#include "engine/model/float16.h"
#include "engine/util/thread_pool.h"

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

namespace {

// Panels [q0, q1) of a row-major matrix of T (the element's bits, copied
// as they are). Columns go in blocks so that a block of the panel stays in
// L1 while its 16 source rows are read in order; lanes past the last row are
// zero.
template <typename T>
void PackPanels(const T* src, T* out, int64_t rows, int64_t cols, int64_t q0, int64_t q1) {
  constexpr int64_t kBlock = 256;
  for (int64_t q = q0; q < q1; ++q) {
    T* panel = out + q * cols * kPanelRows;
    const T* first = src + q * kPanelRows * cols;
    const int64_t valid = std::min<int64_t>(kPanelRows, rows - q * kPanelRows);
    for (int64_t p0 = 0; p0 < cols; p0 += kBlock) {
      const int64_t p1 = std::min(cols, p0 + kBlock);
      for (int64_t l = 0; l < valid; ++l) {
        const T* row = first + l * cols;
        for (int64_t p = p0; p < p1; ++p) panel[p * kPanelRows + l] = row[p];
      }
      for (int64_t l = valid; l < kPanelRows; ++l) {
        for (int64_t p = p0; p < p1; ++p) panel[p * kPanelRows + l] = T{};
      }
    }
  }
}

}  // namespace

void PackWeight(const void* row_major, const Weight& dst, ThreadPool& pool) {
  const size_t elem = DTypeSize(dst.dtype);
  pool.ParallelFor(NumPanels(dst.rows), 1, [&](int64_t q0, int64_t q1) {
    if (elem == 2) {
      PackPanels(static_cast<const uint16_t*>(row_major),
                 static_cast<uint16_t*>(const_cast<void*>(dst.data)), dst.rows, dst.cols, q0, q1);
    } else {
      PackPanels(static_cast<const uint32_t*>(row_major),
                 static_cast<uint32_t*>(const_cast<void*>(dst.data)), dst.rows, dst.cols, q0, q1);
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

}  // namespace tessera::cpu
