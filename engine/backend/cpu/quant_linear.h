// Linear layers over quantized weights with 8-bit activations.
//
// Weights (any quant::QuantType) are repacked at load into tiles of 8
// output rows (WeightLayout::kQuantTiles). A tile holds, per group of G
// inputs (G = quant::AffineFormOf(type).group: 32, or 16 for Q6_K), one
// record:
//   values  the 8 rows' integers q, interleaved by 4 inputs: for inputs
//           [4p, 4p + 4) row r's four bytes sit at 32p + 4r. Types of 4-bit
//           values store two such quads per byte: quad 2p' in the low
//           nibbles, 2p' + 1 in the high nibbles (G/2·8 bytes), the others
//           one byte per value (G·8 bytes);
//   a[8]    f32 scale of each row's group;
//   b[8]    f32 offset of each row's group,
// so that w[r, c] = a[r]·q[r, c] + b[r] (quant::UnpackAffine). Rows past
// the end are zero.
//
// Activations are quantized per row in blocks of 32 (d = max|x| / 127, q =
// round-to-nearest-even(x / d)), with the sums of q per 16 inputs. Output
// (row i, column j) is then, over groups g in input order:
//   acc = fma(float(Σ q_w·q_x), a·d_x, acc);  acc = fma(b, d_x·float(Σ q_x), acc)
// computed by one thread. Every kernel does exactly this, so all kernels
// give the same bits, whatever the batch, tiling or thread split.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"

namespace tessera {
class ThreadPool;
}

namespace tessera::cpu {

constexpr int64_t kQuantTileRows = 8;
constexpr int64_t kActBlock = 32;  // activation block
constexpr int64_t kActSumBlock = 16;

inline int64_t NumQuantTiles(int64_t rows) { return (rows + kQuantTileRows - 1) / kQuantTileRows; }
size_t QuantPackedBytes(DType dtype, int64_t rows, int64_t cols);
// Repacks a row-major matrix of quantized blocks (GGUF layout) into dst.
void PackQuantWeight(const void* row_major, const Weight& dst, ThreadPool& pool);
// Element (j, p) of a kQuantTiles weight: a·q + b.
float QuantTileAt(const Weight& w, int64_t j, int64_t p);

// Activation rows in 8-bit blocks (see above); the vectors only grow.
struct QuantizedRows {
  int64_t n = 0, k = 0;
  std::vector<int8_t> q;      // [n, k]
  std::vector<float> d;       // [n, k / 32]
  std::vector<int32_t> sums;  // [n, k / 16]
};
// Rows [begin, end) of x [n, k] into out (sized by PrepareQuantizedRows).
void PrepareQuantizedRows(int64_t n, int64_t k, QuantizedRows& out);
void QuantizeActivations(const float* x, int64_t begin, int64_t end, QuantizedRows& out);

// y[i, 8t + r] for tiles t in [tile_begin, tile_end) and every row i of x.
using QuantLinearKernel = void (*)(const QuantizedRows& x, const Weight& w, const float* bias,
                                   float* y, int64_t tile_begin, int64_t tile_end);
void QuantLinearPortable(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                         int64_t tile_begin, int64_t tile_end);
void QuantLinearAvx2(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                     int64_t tile_begin, int64_t tile_end);

// The kernel of the selected path (kernels.h; AVX-512 machines use the AVX2 one).
QuantLinearKernel SelectQuantLinearKernel();
const char* QuantLinearKernelName();

// Record geometry of a weight's type.
struct QuantRecord {
  int32_t group = 32;
  bool nibbles = false;   // 4-bit values, two per byte
  bool signed_q = false;  // Q8_0: int8 values
  int32_t value_bytes = 0;
  int32_t bytes = 0;      // value_bytes + 64
};
QuantRecord QuantRecordOf(DType dtype);

}  // namespace tessera::cpu
