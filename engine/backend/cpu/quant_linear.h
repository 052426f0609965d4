// Linear layers over quantized weights with 8-bit activations.
//
// Weights (any quant::QuantType) are repacked at load into tiles of 8
// output rows (WeightLayout::kQuantTiles), in the factored form of
// quant::AffineForm. Along the inputs a tile is a run of superblocks (256
// inputs for the K types and IQ4_XS, one group of 32 otherwise), each:
//   header  A[8] f16, the 8 rows' superblock scales, then B[8] f16 (offset
//           scales) for types with offsets;
//   records one per group of G inputs (G = 32, or 16 for Q6_K, Q3_K, Q2_K):
//     values the 8 rows' integers q, interleaved by 4 inputs: for inputs
//            [4p, 4p + 4) row r's four bytes sit at 32p + 4r. Types of
//            4-bit values store two such quads per byte: quad 2p' in the
//            low nibbles, 2p' + 1 in the high nibbles (G/2·8 bytes), the
//            others one byte per value (G·8 bytes);
//     sa[8]  int8 per row (K types and IQ4_XS; 1 otherwise), then sb[8]
//            int8 for K types with offsets (the type's constant otherwise),
// so that w[r, c] = a·q[r, c] + b with a = float(A[r])·sa[r] and
// b = float(B[r])·sb[r], exact products equal to the reference formulas'
// scale and offset (Q4_0's and Q5_0's q is the stored value less 8 or 16;
// the IQ4 types store indices: q is quant::kIq4Values of the nibble). In
// bits per weight: Q8_0 8.5, Q4_0 4.5, Q4_1 5, Q5_0 8.5, Q5_1 9, Q4_K 4.6,
// Q5_K 8.6, Q6_K 8.6, Q2_K/Q3_K 5.1, IQ4_NL 4.5, IQ4_XS 4.3. Rows past the
// end are zero.
//
// Activations are quantized per row in blocks (d = max|x| / 127, q =
// round-to-nearest-even(x · (1 / d)); d = 0 and q = 0 for a block whose d is
// not a normal float), with the sums of q per 16 inputs. The block is a
// superblock of 256 inputs for the K types and IQ4_XS (per_group_ints), 32 otherwise
// (ActivationBlockOf). Output (row i, column j) is computed by one thread:
//   other types, over groups g in input order:
//     acc = fma(float(Σ q_w·q_x), a·d_x, acc);  acc = fma(b, d_x·float(Σ q_x), acc)
//     (the second only for types with offsets);
//   K types and IQ4_XS, over superblocks s in input order, with the integers
//     ia = Σ_g sa_g · Σ q_w·q_x  and  ib = Σ_g sb_g · Σ q_x  (exact in int32):
//     acc = fma(float(ia), float(A)·d_x, acc);  acc = fma(float(ib), float(B)·d_x, acc)
//     (the second only for types with offsets),
// so a superblock's groups add in integers and take one float step. Every
// kernel does exactly this, so all kernels give the same bits, whatever the
// batch, tiling or thread split.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/kernels.h"

namespace tessera {
class ThreadPool;
}

namespace tessera::cpu {

constexpr int64_t kQuantTileRows = 8;
// Tiles that the widest kernel pass takes at once (the AVX512-VNNI kernel's
// three pairs): callers split work into ranges of whole multiples of it.
constexpr int64_t kQuantTilesPerPass = 6;
constexpr int64_t kActBlock = 32;        // activation block of the other types
constexpr int64_t kActSuperBlock = 256;  // activation block of the K types
constexpr int64_t kActSumBlock = 16;
// The activation block that the kernels of a quantized type take.
int64_t ActivationBlockOf(DType dtype);

inline int64_t NumQuantTiles(int64_t rows) { return (rows + kQuantTileRows - 1) / kQuantTileRows; }
size_t QuantPackedBytes(DType dtype, int64_t rows, int64_t cols);
// Repacks a row-major matrix of quantized blocks (GGUF layout) into dst.
void PackQuantWeight(const void* row_major, const Weight& dst, ThreadPool& pool);
// Element (j, p) of a kQuantTiles weight: a·q + b.
float QuantTileAt(const Weight& w, int64_t j, int64_t p);

// Activation rows in 8-bit blocks (see above); the vectors only grow.
struct QuantizedRows {
  int64_t n = 0, k = 0;
  int64_t block = kActBlock;  // kActBlock or kActSuperBlock
  std::vector<int8_t> q;      // [n, k]
  std::vector<float> d;       // [n, k / block]
  std::vector<int32_t> sums;  // [n, k / 16]
  // q again, as quads of 4 inputs (one int32) interleaved by blocks of 8
  // rows: [n / 8 rounded up][k / 4][8], so that a kernel broadcasts the
  // quads of 8 rows from one pointer with constant offsets (QuadsAt).
  std::vector<int32_t> quads;
  // Unique per PrepareQuantizedRows call (0: never prepared); the rows must
  // not change between their quantization and the next Prepare, so that
  // kernels may reuse what they derived from them (GatherRowSteps).
  uint64_t generation = 0;
};
constexpr int64_t kQuadRows = 8;
// Quad u of row i.
inline const int32_t* QuadsAt(const QuantizedRows& x, int64_t i, int64_t u) {
  return x.quads.data() + ((i / kQuadRows) * (x.k / 4) + u) * kQuadRows + i % kQuadRows;
}
// Copies row i of q into quads (every quantizer calls it per row).
void InterleaveRow(QuantizedRows& out, int64_t i);
// The step of a block whose largest |x| is amax: amax / 127, or 0 where that
// is not a normal float (tiny blocks, NaN), which makes the block zero.
inline float ActivationStep(float amax) {
  const float d = amax / 127.0f;
  return d >= 1.17549435e-38f ? d : 0.0f;  // FLT_MIN
}
// The rows' per-group values that the kernels' float steps use, gathered
// once per kernel call (per thread, and kept while the same prepared rows
// come again with the same group: the tiles of one product arrive in
// several calls, and Q, K and V share their rows): for group g of `group` inputs and row
// i, at g · n + i, the step dx (of the group's block), Σ q_x over the
// group, and dx · float(Σ q_x) (the portable kernel's product); with
// superblock activations, also at h · n + i the sums of groups 2h and
// 2h + 1 as the low and high int16 of one int32 (|Σ q_x| ≤ 32 · 127), for
// vpmaddwd against two groups' offsets. kRowStepsPad entries past the end keep
// reads for a partial block of up to 16 rows in bounds (their values are
// finite and never used for a stored output).
struct RowSteps {
  std::vector<float> dx, dsum;
  std::vector<int32_t> xsum, xpair;
  uint64_t generation = 0;  // of the rows gathered, and their group
  int64_t group = 0;
};
constexpr int64_t kRowStepsPad = 16;
const RowSteps& GatherRowSteps(const QuantizedRows& x, int64_t group);

// x.q as the A tiles of the AMX-INT8 kernels: [block of kRowTileRows
// rows][kRowTileInputs inputs][kRowTileRows rows × kRowTileInputs bytes],
// so that a tile's 1 KB lies in one run (rows past n are zero). Packed once
// per thread and kept while the same prepared rows come again (as
// GatherRowSteps).
constexpr int64_t kRowTileRows = 16, kRowTileInputs = 64;
const int8_t* RowTilesOf(const QuantizedRows& x);
// The first 64-byte boundary in v's storage (give v 64 bytes to spare).
template <typename T>
T* Aligned64(std::vector<T>& v) {
  const auto address = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + ((64 - address % 64) % 64) / sizeof(T);
}
// Row i0's inputs from c0 on (i0 a multiple of kRowTileRows) in the tiles of
// RowTilesOf: the rows of a block follow each other kRowTileInputs apart.
inline const int8_t* RowTileAt(const int8_t* tiles, const QuantizedRows& x, int64_t i0,
                               int64_t c0) {
  return tiles +
         ((i0 / kRowTileRows) * (x.k / kRowTileInputs) + c0 / kRowTileInputs) * kRowTileRows *
             kRowTileInputs +
         c0 % kRowTileInputs;
}

// Rows [begin, end) of x [n, k] into out (sized by PrepareQuantizedRows for
// the activation block of the weights it will meet; k a multiple of it).
void PrepareQuantizedRows(int64_t n, int64_t k, int64_t block, QuantizedRows& out);
void QuantizeActivations(const float* x, int64_t begin, int64_t end, QuantizedRows& out);
// Its AVX2 and AVX-512 twins (the same bytes, scales and sums for finite x),
// and the one of the selected level's vector ISA.
void QuantizeActivationsAvx2(const float* x, int64_t begin, int64_t end, QuantizedRows& out);
void QuantizeActivationsAvx512(const float* x, int64_t begin, int64_t end, QuantizedRows& out);
using QuantizeActivationsFn = void (*)(const float* x, int64_t begin, int64_t end,
                                       QuantizedRows& out);
QuantizeActivationsFn SelectQuantizeActivations();

// y[i, 8t + r] for tiles t in [tile_begin, tile_end) and every row i of x,
// whose block must be ActivationBlockOf(w.dtype).
using QuantLinearKernel = void (*)(const QuantizedRows& x, const Weight& w, const float* bias,
                                   float* y, int64_t tile_begin, int64_t tile_end);
void QuantLinearPortable(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                         int64_t tile_begin, int64_t tile_end);
void QuantLinearAvx2(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                     int64_t tile_begin, int64_t tile_end);

// AVX2 with AVX-VNNI: vpdpbusd (VEX) in place of vpmaddubsw + vpmaddwd.
void QuantLinearAvxVnni(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                        int64_t tile_begin, int64_t tile_end);
// AVX512-VNNI: two tiles (16 outputs) per register, vpdpbusd.
void QuantLinearAvx512Vnni(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                           int64_t tile_begin, int64_t tile_end);
// The same kernel built with GFNI too (4-bit values unpacked with one
// operation fewer), for CPUs with both; the same bits.
void QuantLinearAvx512VnniGfni(const QuantizedRows& x, const Weight& w, const float* bias,
                               float* y, int64_t tile_begin, int64_t tile_end);
// The one of the two this CPU runs best (UseGfniKernel, kernels.h).
QuantLinearKernel Avx512VnniKernel();
// AMX-INT8 (quant_linear_amx.cc): QuantLinearAmxTiles computes Q8_0, Q4_1
// and Q5_1 with one tile product per group for up to 16 rows and two
// tiles, and Q4_K, Q5_K and Q6_K with QuantLinearAmxSplitScales, for any
// number of rows; QuantLinearAmx runs the tiles where they are faster (from
// 12 rows), the AVX512-VNNI kernel elsewhere and for the other types (Q4_0,
// Q5_0, Q2_K, Q3_K, IQ4_NL, IQ4_XS).
void QuantLinearAmx(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                    int64_t tile_begin, int64_t tile_end);
void QuantLinearAmxTiles(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                         int64_t tile_begin, int64_t tile_end);
// AMX-INT8 for the K types: each group's scale split in digits folded into
// the weights, so that a superblock's products add in the tiles; two 3-bit
// halves for Q4_K and Q5_K (quant_linear_k_amx.cc), three signed digits
// for Q6_K (QuantLinearAmxSplitScalesQ6K, quant_linear_q6k_amx.cc).
// AmxSplitScalesApply: whether it computes `dtype`.
bool AmxSplitScalesApply(DType dtype);
void QuantLinearAmxSplitScales(const QuantizedRows& x, const Weight& w, const float* bias,
                               float* y, int64_t tile_begin, int64_t tile_end);
void QuantLinearAmxSplitScalesQ6K(const QuantizedRows& x, const Weight& w, const float* bias,
                                  float* y, int64_t tile_begin, int64_t tile_end);
// True when the CPU has AMX-INT8 and AVX512-VNNI, and the process may use
// the tile state.
bool AmxInt8Available();

// The kernel of a level (kernels.h), and of the selected one: avx2 and
// avx512 run the AVX2 kernel, avx512-vnni and avx512-bf16 the AVX512-VNNI
// one, amx the AMX-INT8 one where the CPU has AMX-INT8.
QuantLinearKernel QuantLinearKernelOf(CpuKernelLevel level);
QuantLinearKernel SelectQuantLinearKernel();
const char* QuantLinearKernelName();

// The record shape of a type, as template arguments of the SIMD kernels;
// kMaxQ bounds |q| (15 and 31 for 4- and 5-bit values, 7 for Q2_K's and
// Q3_K's, 32 for Q6_K's values minus 32, 128 for the int8 of Q8_0 and the
// IQ4 types). Types of one form share its code (Q2_K and Q3_K).
template <int kGroup_, bool kNibbles_, bool kSigned_, bool kHasB_, bool kPerGroupInts_,
          int kMaxQ_, bool kNonlinear_ = false, int kZero_ = 0>
struct QuantForm {
  static constexpr int kGroup = kGroup_;
  static constexpr bool kNibbles = kNibbles_, kSigned = kSigned_, kHasB = kHasB_;
  static constexpr bool kPerGroupInts = kPerGroupInts_;
  static constexpr int kMaxQ = kMaxQ_;
  // The nibbles index quant::kIq4Values (a vpshufb in the SIMD kernels).
  static constexpr bool kNonlinear = kNonlinear_;
  // Unsigned values taken less kZero: a group's dot starts at -kZero·Σ q_x.
  static constexpr int kZero = kZero_;
};

// Calls f(QuantForm<...>{}) with the form of dtype (nothing for a type that
// is not quantized).
template <typename F>
void VisitQuantForm(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kQ4_0:
      return f(QuantForm<32, true, false, false, false, 15, false, 8>{});
    case DType::kQ4_1:
      return f(QuantForm<32, true, false, true, false, 15>{});
    case DType::kQ5_0:
      return f(QuantForm<32, false, false, false, false, 31, false, 16>{});
    case DType::kQ5_1:
      return f(QuantForm<32, false, false, true, false, 31>{});
    case DType::kQ8_0:
      return f(QuantForm<32, false, true, false, false, 128>{});
    case DType::kQ4_K:
      return f(QuantForm<32, true, false, true, true, 15>{});
    case DType::kQ5_K:
      return f(QuantForm<32, false, false, true, true, 31>{});
    case DType::kQ6_K:
      return f(QuantForm<16, false, true, false, true, 32>{});
    case DType::kQ2_K:
    case DType::kQ3_K:
      return f(QuantForm<16, true, false, true, true, 7>{});
    case DType::kIQ4_NL:
      return f(QuantForm<32, true, true, false, false, 128, true>{});
    case DType::kIQ4_XS:
      return f(QuantForm<32, true, true, false, true, 128, true>{});
    default:
      return;  // not a quantized type: never dispatched to a kernel
  }
}

// Tile geometry of a weight's type (see above).
struct QuantRecord {
  int32_t group = 32;
  int32_t groups_per_super = 1;
  bool nibbles = false;         // 4-bit values, two per byte
  bool signed_q = false;        // Q8_0, Q6_K, IQ4: int8 values
  const int8_t* values = nullptr;  // IQ4: the values 4-bit indices name
  int8_t zero = 0;                 // Q4_0, Q5_0: values are q - zero
  bool has_b = true;            // offsets (Q4_1, Q5_1, Q4_K, Q5_K, Q2_K, Q3_K)
  bool per_group_ints = false;  // K types, IQ4_XS: sa (and sb) stored per group
  int8_t sb_const = 0;          // sb of the other types
  int32_t value_bytes = 0;
  int32_t bytes = 0;            // one record: value_bytes + its sa/sb
  int32_t header_bytes = 0;     // A (and B) of a superblock
  int32_t super_bytes = 0;      // header_bytes + groups_per_super · bytes
};
QuantRecord QuantRecordOf(DType dtype);

// Bytes of one tile of a weight with `cols` inputs; superblock s of a tile,
// which starts with its header; record (group) g of a tile.
inline int64_t QuantTileBytes(const QuantRecord& rec, int64_t cols) {
  return cols / rec.group / rec.groups_per_super * rec.super_bytes;
}
inline const uint8_t* QuantSuperAt(const QuantRecord& rec, const uint8_t* tile, int64_t s) {
  return tile + s * rec.super_bytes;
}
inline uint8_t* QuantSuperAt(const QuantRecord& rec, uint8_t* tile, int64_t s) {
  return tile + s * rec.super_bytes;
}
inline const uint8_t* QuantRecordAt(const QuantRecord& rec, const uint8_t* tile, int64_t g) {
  return QuantSuperAt(rec, tile, g / rec.groups_per_super) + rec.header_bytes +
         (g % rec.groups_per_super) * rec.bytes;
}
inline uint8_t* QuantRecordAt(const QuantRecord& rec, uint8_t* tile, int64_t g) {
  return QuantSuperAt(rec, tile, g / rec.groups_per_super) + rec.header_bytes +
         (g % rec.groups_per_super) * rec.bytes;
}

}  // namespace tessera::cpu
