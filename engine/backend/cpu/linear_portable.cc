#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

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
    default:  // quantized weights take the quantized kernels
      break;
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

// Panels [q0, q1) of a row-major matrix of T whose row 16·q0 starts at
// `first` (the element's bits, copied as they are). Columns go in blocks so
// that a block of the panel stays in L1 while its 16 source rows are read
// in order; lanes past the last row are zero.
template <typename T>
void PackPanels(const T* first, T* out, int64_t rows, int64_t cols, int64_t q0, int64_t q1) {
  constexpr int64_t kBlock = 256;
  for (int64_t q = q0; q < q1; ++q) {
    T* panel = out + q * cols * kPanelRows;
    const T* rows_q = first + (q - q0) * kPanelRows * cols;
    const int64_t valid = std::min<int64_t>(kPanelRows, rows - q * kPanelRows);
    int64_t done = 0;  // columns already packed
    if constexpr (sizeof(T) == 4) {
      if (valid == kPanelRows && SelectedKernelPath() == CpuKernelPath::kAvx512) {
        done = PackFullPanel32Avx512(reinterpret_cast<const uint32_t*>(rows_q), cols,
                                     reinterpret_cast<uint32_t*>(panel));
      }
    }
    for (int64_t p0 = done; p0 < cols; p0 += kBlock) {
      const int64_t p1 = std::min(cols, p0 + kBlock);
      for (int64_t l = 0; l < valid; ++l) {
        const T* row = rows_q + l * cols;
        for (int64_t p = p0; p < p1; ++p) panel[p * kPanelRows + l] = row[p];
      }
      for (int64_t l = valid; l < kPanelRows; ++l) {
        for (int64_t p = p0; p < p1; ++p) panel[p * kPanelRows + l] = T{};
      }
    }
  }
}

// Source rows are staged about this many bytes at a time: a few panels,
// which stay in L2 while they are packed.
constexpr size_t kStageBytes = size_t{512} << 10;

// Panels per staged group for rows of `row_bytes` bytes.
int64_t PanelsPerStage(size_t row_bytes) {
  return std::max<int64_t>(1, static_cast<int64_t>(kStageBytes / (kPanelRows * row_bytes)));
}

// Rows [r0, r1) of a row-major matrix of `row_bytes`-byte rows: read from
// `source` into `stage` when it names a file, else (or when the read fails)
// where they lie in memory. The stage is kept per thread: fresh memory for
// every group would cost a page fault per 4 KiB.
const uint8_t* StageRows(const void* row_major, const FileRange& source, size_t row_bytes,
                         int64_t r0, int64_t r1) {
  const uint8_t* in_memory = static_cast<const uint8_t*>(row_major) + r0 * row_bytes;
  if (source.file == nullptr) return in_memory;
  thread_local std::vector<uint8_t> stage;
  const size_t bytes = static_cast<size_t>(r1 - r0) * row_bytes;
  if (stage.size() < bytes) stage.resize(bytes);
  if (!source.file->Read(source.offset + r0 * row_bytes, stage.data(), bytes).ok()) {
    return in_memory;
  }
  return stage.data();
}

}  // namespace

void PackWeight(const void* row_major, const Weight& dst, ThreadPool& pool, FileRange source) {
  const size_t elem = DTypeSize(dst.dtype), row_bytes = elem * dst.cols;
  const int64_t group = PanelsPerStage(row_bytes);
  pool.ParallelFor(NumPanels(dst.rows), 1, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; q += group) {
      const int64_t qe = std::min(q1, q + group);
      const int64_t r1 = std::min(dst.rows, qe * kPanelRows);
      const uint8_t* rows = StageRows(row_major, source, row_bytes, q * kPanelRows, r1);
      void* out = const_cast<void*>(dst.data);
      if (elem == 2) {
        PackPanels(reinterpret_cast<const uint16_t*>(rows), static_cast<uint16_t*>(out), dst.rows,
                   dst.cols, q, qe);
      } else {
        PackPanels(reinterpret_cast<const uint32_t*>(rows), static_cast<uint32_t*>(out), dst.rows,
                   dst.cols, q, qe);
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

// The AMX layout of a panel is the panel layout of its input pairs: pair
// p' = (2p', 2p' + 1) of row l sits at p'·16 + l (in 32-bit units), with
// the inputs zero-padded to whole chunks of 32. So rows become bf16 pairs
// padded to k_pad, which PackPanels places as 32-bit elements.
void PackWeightAmx(const void* row_major, DType src_dtype, const Weight& dst, ThreadPool& pool,
                   FileRange source) {
  const int64_t k_pad = AmxPaddedCols(dst.cols);
  const size_t row_bytes = DTypeSize(src_dtype) * dst.cols;
  const int64_t group = PanelsPerStage(std::max<size_t>(row_bytes, 2 * k_pad));
  pool.ParallelFor(NumPanels(dst.rows), 1, [&](int64_t q0, int64_t q1) {
    thread_local std::vector<uint16_t> pairs;
    for (int64_t q = q0; q < q1; q += group) {
      const int64_t qe = std::min(q1, q + group);
      const int64_t r0 = q * kPanelRows, r1 = std::min(dst.rows, qe * kPanelRows);
      const uint8_t* rows = StageRows(row_major, source, row_bytes, r0, r1);
      if (src_dtype == DType::kBF16 && dst.cols == k_pad) {
        // The staged rows are the pairs already.
        PackPanels(reinterpret_cast<const uint32_t*>(rows),
                   static_cast<uint32_t*>(const_cast<void*>(dst.data)), dst.rows, k_pad / 2, q, qe);
        continue;
      }
      pairs.assign(static_cast<size_t>((r1 - r0) * k_pad), 0);
      for (int64_t r = 0; r < r1 - r0; ++r) {
        uint16_t* out = pairs.data() + r * k_pad;
        const uint8_t* row = rows + r * row_bytes;
        if (src_dtype == DType::kBF16) {
          std::memcpy(out, row, row_bytes);
        } else {
          for (int64_t p = 0; p < dst.cols; ++p) {
            out[p] = FloatToBf16(LoadElement(row, src_dtype, p));
          }
        }
      }
      PackPanels(reinterpret_cast<const uint32_t*>(pairs.data()),
                 static_cast<uint32_t*>(const_cast<void*>(dst.data)), dst.rows, k_pad / 2, q, qe);
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
