// Linear layers over quantized weights (engine/backend/cpu/quant_linear.h)
// against the dequantize-then-f64 reference, on every kernel path this CPU
// can run; and the paths against each other, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/quant_linear.h"
#include "engine/model/float16.h"
#include "engine/quant/blocks.h"
#include "engine/quant/quant.h"
#include "gtest/gtest.h"

namespace tessera::cpu {
namespace {

using quant::QuantType;

// Random blocks: every bit pattern of the integer fields is a valid block;
// the f16 scales are drawn in a plausible range (and the signed scales of
// Q6_K, Q3_K and IQ4_XS cover both signs).
std::vector<uint8_t> RandomBlocks(QuantType type, int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const quant::QuantInfo& info = quant::Info(type);
  const int64_t blocks = rows * cols / info.block_elems;
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * info.block_bytes));
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  auto half = [&](uint8_t* p, float v) {
    const uint16_t h = FloatToHalf(v);
    std::memcpy(p, &h, 2);
  };
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* b = bytes.data() + i * info.block_bytes;
    switch (type) {
      case QuantType::kQ4_1:
      case QuantType::kQ5_1:
        half(b, scale(rng)), half(b + 2, -8.0f * scale(rng));
        break;
      case QuantType::kQ4_K:
      case QuantType::kQ5_K:
        half(b, scale(rng) / 16), half(b + 2, scale(rng) / 16);
        break;
      case QuantType::kQ6_K:
        half(b + offsetof(quant::BlockQ6_K, d), scale(rng) / 32);
        break;
      case QuantType::kQ2_K:
        half(b + offsetof(quant::BlockQ2_K, d), scale(rng) / 4);
        half(b + offsetof(quant::BlockQ2_K, dmin), scale(rng) / 4);
        break;
      case QuantType::kQ3_K:
        half(b + offsetof(quant::BlockQ3_K, d), scale(rng) / 16);
        break;
      case QuantType::kIQ4_NL:
        half(b, scale(rng) / 16);
        break;
      case QuantType::kIQ4_XS:
        half(b, scale(rng) / 256);
        break;
      default:
        half(b, scale(rng));
    }
  }
  return bytes;
}

std::vector<float> Dequantized(QuantType type, const std::vector<uint8_t>& blocks, int64_t rows,
                               int64_t cols) {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  const int64_t row_bytes = quant::RowBytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    quant::DequantizeRow(type, blocks.data() + r * row_bytes, w.data() + r * cols, cols);
  }
  return w;
}

std::vector<float> RandomActivations(int64_t n, int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (auto& v : x) v = dist(rng);
  x[3] = 40.0f;  // an outlier in the first block of row 0
  if (n > 1) std::fill(x.begin() + k, x.begin() + k + 32, 0.0f);  // an all-zero block
  return x;
}

// Blocks of `type` [rows, cols] packed into tiles; w points into bytes.
struct PackedWeight {
  std::vector<uint8_t> bytes;
  Weight w;
};
PackedWeight Packed(QuantType type, const std::vector<uint8_t>& blocks, int64_t rows,
                    int64_t cols) {
  PackedWeight p;
  p.bytes.resize(QuantPackedBytes(DTypeOf(type), rows, cols));
  p.w = Weight{p.bytes.data(), DTypeOf(type), rows, cols, WeightLayout::kQuantTiles};
  ThreadPool pool(1);
  PackQuantWeight(blocks.data(), p.w, pool);
  return p;
}

struct Case {
  QuantType type;
  int64_t rows, cols;
};

class QuantLinearTest : public ::testing::TestWithParam<QuantType> {};

// Every kernel this CPU can run: each level's, once (the VNNI kernels only
// where the CPU has VNNI), the AVX512-VNNI kernel both with and without
// GFNI where the CPU has both, and the AMX tiles for every type and batch
// where the CPU has AMX-INT8.
std::vector<QuantLinearKernel> Kernels() {
  std::vector<QuantLinearKernel> k;
  if (AmxInt8Available()) k.push_back(&QuantLinearAmxTiles);
  if (CpuHasAvx512Vnni()) {
    k.push_back(&QuantLinearAvx512Vnni);
    if (CpuHasGfni()) k.push_back(&QuantLinearAvx512VnniGfni);
  }
  for (CpuKernelLevel level : kAllKernelLevels) {
    if (!CpuSupportsLevel(level)) continue;
    const QuantLinearKernel kernel = QuantLinearKernelOf(level);
    if (std::find(k.begin(), k.end(), kernel) == k.end()) k.push_back(kernel);
  }
  return k;
}

std::vector<float> RunKernel(QuantLinearKernel kernel, const Weight& w, const std::vector<float>& x,
                       int64_t n, const float* bias) {
  QuantizedRows q;
  PrepareQuantizedRows(n, w.cols, ActivationBlockOf(w.dtype), q);
  QuantizeActivations(x.data(), 0, n, q);
  std::vector<float> y(static_cast<size_t>(n * w.rows), -1.0f);
  kernel(q, w, bias, y.data(), 0, NumQuantTiles(w.rows));
  return y;
}

// Every output within the error that 8-bit activations allow: each input
// moves by at most half its block's step d = max|x| / 127 (blocks of 256
// for the K types, 32 otherwise), so |error| ≤ Σ_c |w_c| · d_c / 2, plus
// f32 rounding of the sums.
TEST_P(QuantLinearTest, MatchesDequantizedReference) {
  const QuantType type = GetParam();
  const int64_t rows = 37, cols = 512, n = 6;
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 7);
  const std::vector<float> w_ref = Dequantized(type, blocks, rows, cols);
  const std::vector<float> x = RandomActivations(n, cols, 11);
  std::vector<float> bias(rows);
  for (int64_t j = 0; j < rows; ++j) bias[j] = 0.01f * static_cast<float>(j);

  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  for (int64_t j = 0; j < rows; ++j) {
    for (int64_t p = 0; p < cols; ++p) {
      const float ref = w_ref[j * cols + p];
      ASSERT_NEAR(QuantTileAt(w, j, p), ref, 1e-6f * (1.0f + std::fabs(ref))) << j << "," << p;
    }
  }
  for (QuantLinearKernel kernel : Kernels()) {
    const std::vector<float> y = RunKernel(kernel, w, x, n, bias.data());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < rows; ++j) {
        double exact = bias[j], bound = 0.0, magnitude = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const double wc = w_ref[j * cols + c], xc = x[i * cols + c];
          exact += wc * xc;
          magnitude += std::fabs(wc * xc);
          const int64_t block = ActivationBlockOf(w.dtype);
          float amax = 0.0f;
          for (int64_t e = c / block * block; e < c / block * block + block; ++e) {
            amax = std::max(amax, std::fabs(x[i * cols + e]));
          }
          bound += std::fabs(wc) * amax / 127.0 / 2.0;
        }
        EXPECT_NEAR(y[i * rows + j], exact, bound * 1.001 + 1e-5 * magnitude + 1e-6)
            << quant::Info(type).name << " row " << i << " out " << j;
      }
    }
  }
}

// The same bits from every path, for every batch size: row i alone equals
// row i in a batch of 13.
TEST_P(QuantLinearTest, PathsAndBatchesAgreeBitForBit) {
  const QuantType type = GetParam();
  const int64_t rows = 45, cols = 768, n = 13;
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 3);
  const std::vector<float> x = RandomActivations(n, cols, 5);
  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  const std::vector<float> batch = RunKernel(&QuantLinearPortable, w, x, n, nullptr);
  for (QuantLinearKernel kernel : Kernels()) {
    EXPECT_EQ(RunKernel(kernel, w, x, n, nullptr), batch);
    for (int64_t i : {int64_t{0}, int64_t{5}, int64_t{12}}) {
      const std::vector<float> one(x.begin() + i * cols, x.begin() + (i + 1) * cols);
      const std::vector<float> y = RunKernel(kernel, w, one, 1, nullptr);
      EXPECT_TRUE(std::equal(y.begin(), y.end(), batch.begin() + i * rows)) << i;
    }
  }
}

// Batches of many tile products (the AMX tiles take 16 rows at a time,
// then a partial block of 5; the Q4_K and Q5_K tiles two blocks of 16 at
// a time, then a block of 5 alone (37 rows) or with 16 (21, 53 rows), in
// chunks of 32 rows (64 for Q6_K; 150 rows end with a chunk of 22); the VNNI
// kernel 4 at a time, then what is left, with its six tiles, the last one
// partial, in one pass), and small batches, give the portable bits.
TEST_P(QuantLinearTest, LargeAndSmallBatchesMatchThePortableBits) {
  const QuantType type = GetParam();
  const int64_t rows = 45, cols = 512;
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 19);
  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  for (int64_t n : {37, 3, 4, 16, 21, 53, 150}) {
    const std::vector<float> x = RandomActivations(n, cols, 29 + n);
    const std::vector<float> want = RunKernel(&QuantLinearPortable, w, x, n, nullptr);
    for (QuantLinearKernel kernel : Kernels()) {
      EXPECT_EQ(RunKernel(kernel, w, x, n, nullptr), want) << n;
    }
  }
}

// A weight of more tiles than the K types' tiles take in one group of pairs
// (32 pairs, 512 rows), against 50 rows (two chunks for Q4_K and Q5_K),
// gives the portable bits.
TEST_P(QuantLinearTest, ManyTilesGiveThePortableBits) {
  const QuantType type = GetParam();
  const int64_t rows = 531, cols = 256, n = 50;
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 37);
  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  const std::vector<float> x = RandomActivations(n, cols, 41);
  const std::vector<float> want = RunKernel(&QuantLinearPortable, w, x, n, nullptr);
  for (QuantLinearKernel kernel : Kernels()) EXPECT_EQ(RunKernel(kernel, w, x, n, nullptr), want);
}

// The AVX512-VNNI kernel with each way of asking for the weights before
// it reads them (QuantWeightPrefetch, chosen by CPU vendor): none, ahead in
// passes of one or two rows, or the next pass's tiles in the last rows of a
// pass (13 tiles: two passes of three pairs, or for Q6_K from 8 rows three
// of two, then a tile without a partner) gives the portable bits.
TEST_P(QuantLinearTest, EveryPrefetchGivesThePortableBits) {
  const QuantType type = GetParam();
  const int64_t rows = 101, cols = 512;  // 13 tiles, the last one partial
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 43);
  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  const QuantPrefetch saved = QuantWeightPrefetch();
  for (QuantPrefetch mode :
       {QuantPrefetch::kOff, QuantPrefetch::kAhead, QuantPrefetch::kNextTiles}) {
    SetQuantWeightPrefetch(mode);
    EXPECT_EQ(QuantWeightPrefetch(), mode);
    for (int64_t n : {1, 2, 3, 9, 16}) {
      const std::vector<float> x = RandomActivations(n, cols, 47 + n);
      const std::vector<float> want = RunKernel(&QuantLinearPortable, w, x, n, nullptr);
      for (QuantLinearKernel kernel : Kernels()) {
        EXPECT_EQ(RunKernel(kernel, w, x, n, nullptr), want)
            << n << " " << static_cast<int>(mode);
      }
    }
  }
  SetQuantWeightPrefetch(saved);
}

// The AVX512-VNNI kernel's Q6_K passes of two pairs and 8 rows
// (QuantEightRowPasses) and its three-pair passes of 4 rows give the
// portable bits: batches whose 8-row passes are followed by a pass of 4
// rows, by 4 and fewer, by fewer alone, or by none, and a range of 13
// tiles split so that passes end mid-range and tiles go alone.
TEST_P(QuantLinearTest, EightRowPassesGiveThePortableBits) {
  const QuantType type = GetParam();
  const int64_t rows = 101, cols = 512;  // 13 tiles, the last one partial
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 53);
  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  const bool saved = QuantEightRowPasses();
  for (bool on : {false, true}) {
    SetQuantEightRowPasses(on);
    EXPECT_EQ(QuantEightRowPasses(), on);
    for (int64_t n : {8, 10, 12, 13, 16, 23}) {
      const std::vector<float> x = RandomActivations(n, cols, 59 + n);
      const std::vector<float> want = RunKernel(&QuantLinearPortable, w, x, n, nullptr);
      QuantizedRows q;
      PrepareQuantizedRows(n, cols, ActivationBlockOf(w.dtype), q);
      QuantizeActivations(x.data(), 0, n, q);
      for (QuantLinearKernel kernel : Kernels()) {
        EXPECT_EQ(RunKernel(kernel, w, x, n, nullptr), want) << n << " " << on;
        std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
        for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 5}, {5, 6}, {6, 13}}) {
          kernel(q, w, nullptr, y.data(), t0, t1);
        }
        EXPECT_EQ(y, want) << n << " " << on << " split";
      }
    }
  }
  SetQuantEightRowPasses(saved);
}

// Any split of the tiles gives the same bits (the AVX512-VNNI kernel takes
// six at a time, then two, and a range of odd length ends with one alone;
// the whole range ends with the pair that holds the partial tile).
TEST_P(QuantLinearTest, TileRangesOfAnyLength) {
  const QuantType type = GetParam();
  const int64_t rows = 61, cols = 512, n = 7;  // 8 tiles, the last one partial
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 13);
  const std::vector<float> x = RandomActivations(n, cols, 17);
  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  const std::vector<float> whole = RunKernel(&QuantLinearPortable, w, x, n, nullptr);
  QuantizedRows q;
  PrepareQuantizedRows(n, cols, ActivationBlockOf(w.dtype), q);
  QuantizeActivations(x.data(), 0, n, q);
  for (QuantLinearKernel kernel : Kernels()) {
    for (const std::vector<int64_t>& splits :
         {std::vector<int64_t>{0, 1, 4, 5, 8}, {0, 1, 6, 8}, {0, 3, 8}, {0, 8}}) {
      std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
      for (size_t s = 0; s + 1 < splits.size(); ++s) {
        kernel(q, w, nullptr, y.data(), splits[s], splits[s + 1]);
      }
      EXPECT_EQ(y, whole) << splits.size();
    }
  }
}

// One QuantizedRows prepared again for new activations of the same shape:
// kernels that keep what they derived from the rows (GatherRowSteps) must
// see the new ones, and a product split over calls must use one set.
TEST_P(QuantLinearTest, RowsPreparedAgainGiveTheirOwnResults) {
  const QuantType type = GetParam();
  const int64_t rows = 24, cols = 256, n = 5;
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 23);
  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  for (QuantLinearKernel kernel : Kernels()) {
    QuantizedRows q;
    for (uint64_t seed : {31, 37, 41}) {
      const std::vector<float> x = RandomActivations(n, cols, seed);
      PrepareQuantizedRows(n, cols, ActivationBlockOf(w.dtype), q);
      QuantizeActivations(x.data(), 0, n, q);
      std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
      kernel(q, w, nullptr, y.data(), 0, 1);
      kernel(q, w, nullptr, y.data(), 1, NumQuantTiles(rows));
      EXPECT_EQ(y, RunKernel(&QuantLinearPortable, w, x, n, nullptr)) << "seed " << seed;
    }
  }
}

// Packs blocks of `type` and checks every kernel against the exact sums of
// the dequantized weights with activations x [n, cols] of ±1, which
// quantize exactly (d = 1/127).
void ExpectExactSums(QuantType type, const std::vector<uint8_t>& blocks, int64_t rows,
                     int64_t cols, const std::vector<float>& x, int64_t n) {
  const PackedWeight packed = Packed(type, blocks, rows, cols);
  const Weight& w = packed.w;
  const std::vector<float> w_ref = Dequantized(type, blocks, rows, cols);
  for (QuantLinearKernel kernel : Kernels()) {
    const std::vector<float> y = RunKernel(kernel, w, x, n, nullptr);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < rows; ++j) {
        double exact = 0.0;
        for (int64_t c = 0; c < cols; ++c) exact += double(w_ref[j * cols + c]) * x[i * cols + c];
        EXPECT_NEAR(y[i * rows + j], exact, 1e-4 * (1.0 + std::fabs(exact)))
            << quant::Info(type).name << " " << i << "," << j;
      }
    }
  }
}

// Extreme integers: Q8_0 weights of -128 and 127 against activations of
// ±127 (every block's maximum), where a saturating or biased product would
// show.
TEST(QuantLinearExtremes, Q8_0FullRange) {
  const int64_t rows = 16, cols = 256, n = 3;
  const quant::QuantInfo& info = quant::Info(QuantType::kQ8_0);
  std::vector<uint8_t> blocks(static_cast<size_t>(rows * cols / 32 * info.block_bytes));
  for (int64_t b = 0; b < rows * cols / 32; ++b) {
    uint8_t* block = blocks.data() + b * info.block_bytes;
    const uint16_t d = FloatToHalf(0.01f);
    std::memcpy(block, &d, 2);
    for (int c = 0; c < 32; ++c) block[2 + c] = (b + c) % 3 == 0 ? 0x80 : (c % 2 ? 0x7F : 0x81);
  }
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 5 == 0 ? -1.0f : 1.0f;
  ExpectExactSums(QuantType::kQ8_0, blocks, rows, cols, x, n);
}

// Extreme integers of the K types, where superblock sums are largest
// (|ia| up to 2^27): every Q4_K, Q5_K and Q2_K bit set (values 15, 31 or 3,
// scales and offsets 63 or 15), every Q6_K value -32 with scale -128; Q3_K
// with every bit clear (value -4, scale -32, so sb = -128) and set (3 and
// 31); the IQ4 types with every index 0 (-127; IQ4_XS's scale -32) and 15
// (113; scale 31); Q4_0 and Q5_0 at both ends (-8 and 7, -16 and 15, the
// first a dot that is all start), against activations that quantize to 127
// (row 0) or ±127 (row 1). An int16 sum or an overflowing product would
// show.
TEST(QuantLinearExtremes, KTypesFullRange) {
  const int64_t rows = 16, cols = 512, n = 2;
  std::vector<float> x(static_cast<size_t>(n * cols), 1.0f);
  for (int64_t c = 0; c < cols; ++c) x[cols + c] = c % 5 == 0 ? -1.0f : 1.0f;
  const std::pair<QuantType, uint8_t> cases[] = {
      {QuantType::kQ4_K, 0xFF},   {QuantType::kQ5_K, 0xFF},  {QuantType::kQ6_K, 0},
      {QuantType::kQ2_K, 0xFF},   {QuantType::kQ3_K, 0},     {QuantType::kQ3_K, 0xFF},
      {QuantType::kIQ4_NL, 0},    {QuantType::kIQ4_NL, 0xFF}, {QuantType::kIQ4_XS, 0},
      {QuantType::kIQ4_XS, 0xFF}, {QuantType::kQ4_0, 0},    {QuantType::kQ4_0, 0xFF},
      {QuantType::kQ5_0, 0},      {QuantType::kQ5_0, 0xFF}};
  for (const auto& [type, fill] : cases) {
    SCOPED_TRACE(testing::Message() << quant::Info(type).name << " fill " << int(fill));
    const quant::QuantInfo& info = quant::Info(type);
    const int64_t count = rows * cols / info.block_elems;
    std::vector<uint8_t> blocks(static_cast<size_t>(count * info.block_bytes), fill);
    const uint16_t d = FloatToHalf(0.001f), dmin = FloatToHalf(0.0005f);
    for (int64_t b = 0; b < count; ++b) {
      uint8_t* block = blocks.data() + b * info.block_bytes;
      switch (type) {
        case QuantType::kQ6_K:
          std::memset(block + offsetof(quant::BlockQ6_K, scales), 0x80, 16);
          std::memcpy(block + offsetof(quant::BlockQ6_K, d), &d, 2);
          break;
        case QuantType::kQ2_K:
          std::memcpy(block + offsetof(quant::BlockQ2_K, d), &d, 2);
          std::memcpy(block + offsetof(quant::BlockQ2_K, dmin), &dmin, 2);
          break;
        case QuantType::kQ3_K:
          std::memcpy(block + offsetof(quant::BlockQ3_K, d), &d, 2);
          break;
        case QuantType::kIQ4_NL:
        case QuantType::kIQ4_XS:
        case QuantType::kQ4_0:
        case QuantType::kQ5_0:
          std::memcpy(block, &d, 2);
          break;
        default:
          std::memcpy(block, &d, 2);
          std::memcpy(block + 2, &dmin, 2);
      }
    }
    ExpectExactSums(type, blocks, rows, cols, x, n);
  }
}

// Outputs of different activation blocks and groups (Q8_0 and IQ4_NL in
// 32s; Q6_K and Q3_K in groups of 16, Q4_K and IQ4_XS of 32, all in
// superblocks of 256) in one LinearMany: each gets what it gets alone.
TEST(QuantBackendTest, LinearManyMixesActivationBlocks) {
  const int64_t rows = 24, cols = 512, n = 3;
  const std::vector<float> x = RandomActivations(n, cols, 47);
  CpuBackend backend(2);
  std::vector<std::vector<float>> alone, many;
  std::vector<Weight> weights;
  std::vector<std::vector<uint8_t>> files;
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ6_K, QuantType::kQ4_K, QuantType::kQ3_K,
                         QuantType::kIQ4_XS, QuantType::kIQ4_NL}) {
    files.push_back(RandomBlocks(type, rows, cols, 53));
    auto w = backend.PrepareWeight(files.back().data(), DTypeOf(type), rows, cols,
                                   WeightUse::kLinear);
    ASSERT_TRUE(w.ok()) << w.status();
    weights.push_back(*w);
    alone.push_back(RunKernel(&QuantLinearPortable, *w, x, n, nullptr));
    many.emplace_back(static_cast<size_t>(n * rows), -1.0f);
  }
  std::vector<LinearOutput> outs;
  for (size_t i = 0; i < weights.size(); ++i) {
    outs.push_back({&weights[i], nullptr, many[i].data()});
  }
  backend.LinearMany(x.data(), n, outs);
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(many[i], alone[i]) << i;
}

// The activation quantizers of every vector ISA give the same bytes,
// scales and sums, in blocks of 32 and of 256: random rows with an outlier
// and an all-zero block, ties (d = 1, so x.5 rounds to even), subnormals
// and signed zeros.
TEST(QuantizeActivationsTest, EveryPathGivesThePortableBytes) {
  const int64_t n = 5, k = 512;
  std::vector<float> x = RandomActivations(n, k, 23);
  for (int c = 0; c < 32; ++c) x[2 * k + c] = c == 0 ? 127.0f : 0.5f * static_cast<float>(c - 16);
  for (int c = 0; c < 256; ++c) x[3 * k + 256 + c] = (c % 2 ? -1.0f : 1.0f) * 1e-40f * float(c + 1);
  x[4 * k + 64] = -0.0f;
  std::vector<QuantizeActivationsFn> paths;
  if (CpuHasAvx2Kernels()) paths.push_back(&QuantizeActivationsAvx2);
  if (CpuHasAvx512Kernels()) paths.push_back(&QuantizeActivationsAvx512);
  if (paths.empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (int64_t block : {kActBlock, kActSuperBlock}) {
    QuantizedRows want;
    PrepareQuantizedRows(n, k, block, want);
    QuantizeActivations(x.data(), 0, n, want);
    EXPECT_EQ(want.q[2 * k + 16 + 5], 2);   // 2.5 rounds to 2 (127 is the largest |x|)
    EXPECT_EQ(want.q[2 * k + 16 - 7], -4);  // -3.5 rounds to -4
    EXPECT_EQ(want.d[3 * (k / block) + 256 / block], 0.0f);  // a block of subnormals is zero
    EXPECT_EQ(want.q[3 * k + 296], 0);
    for (QuantizeActivationsFn path : paths) {
      QuantizedRows got;
      PrepareQuantizedRows(n, k, block, got);
      path(x.data(), 0, 2, got);
      path(x.data(), 2, n, got);
      EXPECT_EQ(got.q, want.q) << block;
      EXPECT_EQ(got.sums, want.sums) << block;
      ASSERT_EQ(got.d.size(), want.d.size());
      for (size_t b = 0; b < want.d.size(); ++b) {
        EXPECT_EQ(std::memcmp(&got.d[b], &want.d[b], sizeof(float)), 0) << block << " " << b;
      }
    }
  }
}

// The portable quantizer's superblocks: one step per 256 inputs, the sums
// per 16 inputs, and the bytes of a block of 32 whose step is the
// superblock's.
TEST(QuantizeActivationsTest, SuperblocksShareOneStep) {
  const int64_t n = 2, k = 512;
  const std::vector<float> x = RandomActivations(n, k, 43);
  QuantizedRows q;
  PrepareQuantizedRows(n, k, kActSuperBlock, q);
  QuantizeActivations(x.data(), 0, n, q);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t s = 0; s < k / kActSuperBlock; ++s) {
      float amax = 0.0f;
      for (int64_t c = 0; c < kActSuperBlock; ++c) {
        amax = std::max(amax, std::fabs(x[i * k + s * kActSuperBlock + c]));
      }
      const float d = ActivationStep(amax);
      ASSERT_GT(d, 0.0f);
      EXPECT_EQ(q.d[i * (k / kActSuperBlock) + s], d);
      for (int64_t c = 0; c < kActSuperBlock; ++c) {
        const int64_t at = i * k + s * kActSuperBlock + c;
        EXPECT_EQ(q.q[at], static_cast<int8_t>(std::nearbyint(x[at] * (1.0f / d))))
            << i << " " << c;
      }
    }
    for (int64_t b = 0; b < k / kActSumBlock; ++b) {
      int32_t sum = 0;
      for (int64_t c = 0; c < kActSumBlock; ++c) sum += q.q[i * k + b * kActSumBlock + c];
      EXPECT_EQ(q.sums[i * (k / kActSumBlock) + b], sum);
    }
  }
}

// Each level names its kernel: VNNI kernels from the VNNI levels up, the
// AVX2 one for avx2 and avx512, AMX-INT8 at amx where the CPU has it.
TEST(QuantKernelLevels, EachLevelRunsItsKernel) {
  EXPECT_EQ(QuantLinearKernelOf(CpuKernelLevel::kPortable), &QuantLinearPortable);
  EXPECT_EQ(QuantLinearKernelOf(CpuKernelLevel::kAvx2), &QuantLinearAvx2);
  EXPECT_EQ(QuantLinearKernelOf(CpuKernelLevel::kAvxVnni), &QuantLinearAvxVnni);
  EXPECT_EQ(QuantLinearKernelOf(CpuKernelLevel::kAvx512), &QuantLinearAvx2);
  if (CpuSupportsLevel(CpuKernelLevel::kAvx512Vnni)) {
    const QuantLinearKernel vnni =
        UseGfniKernel() ? &QuantLinearAvx512VnniGfni : &QuantLinearAvx512Vnni;
    EXPECT_EQ(Avx512VnniKernel(), vnni);
    EXPECT_EQ(QuantLinearKernelOf(CpuKernelLevel::kAvx512Vnni), vnni);
    EXPECT_EQ(QuantLinearKernelOf(CpuKernelLevel::kAvx512Bf16), vnni);
  }
  if (CpuSupportsLevel(CpuKernelLevel::kAmx)) {
    EXPECT_EQ(QuantLinearKernelOf(CpuKernelLevel::kAmx),
              AmxInt8Available() ? &QuantLinearAmx : Avx512VnniKernel());
  }
  EXPECT_TRUE(CpuSupportsLevel(SelectedKernelLevel()));
}

// The split-scale AMX kernels take the K types (Q4_K and Q5_K with two
// digits, Q6_K with three), and no other.
TEST(QuantKernelLevels, SplitScalesTakeTheKTypes) {
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                  DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ2_K, DType::kQ3_K,
                  DType::kIQ4_NL, DType::kIQ4_XS, DType::kF16}) {
    EXPECT_EQ(AmxSplitScalesApply(t), t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K)
        << int(t);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantLinearTest,
                         ::testing::Values(QuantType::kQ4_0, QuantType::kQ4_1, QuantType::kQ5_0,
                                           QuantType::kQ5_1, QuantType::kQ8_0, QuantType::kQ4_K,
                                           QuantType::kQ5_K, QuantType::kQ6_K, QuantType::kQ2_K,
                                           QuantType::kQ3_K, QuantType::kIQ4_NL,
                                           QuantType::kIQ4_XS),
                         [](const auto& info) { return std::string(quant::Info(info.param).name); });

// Packed bytes per weight: the factored scales keep the tiles near the
// file's size (bits per weight, file → packed: Q8_0 8.5 → 8.5, Q4_0 4.5 →
// 4.5, Q5_0 5.5 → 8.5, Q4_K 4.5 → 4.625, Q6_K 6.56 → 8.56, Q2_K 2.63 and
// Q3_K 3.44 → 5.13, IQ4_NL 4.5 → 4.5, IQ4_XS 4.25 → 4.31), for 8 rows of
// 256 inputs.
TEST(QuantPackedSize, BitsPerWeight) {
  const std::pair<QuantType, double> cases[] = {
      {QuantType::kQ4_0, 4.5}, {QuantType::kQ4_1, 5.0}, {QuantType::kQ5_0, 8.5},
      {QuantType::kQ5_1, 9.0}, {QuantType::kQ8_0, 8.5}, {QuantType::kQ4_K, 4.625},
      {QuantType::kQ5_K, 8.625}, {QuantType::kQ6_K, 8.5625}, {QuantType::kQ2_K, 5.125},
      {QuantType::kQ3_K, 5.125}, {QuantType::kIQ4_NL, 4.5}, {QuantType::kIQ4_XS, 4.3125}};
  for (const auto& [type, bits] : cases) {
    EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(QuantPackedBytes(DTypeOf(type), 8, 256)) / (8 * 256), bits)
        << quant::Info(type).name;
  }
}

// Through the backend: PrepareWeight packs, Linear and LinearMany quantize
// the rows once and agree with the kernel, whatever the thread count; the
// embedding of a quantized table is its dequantized rows.
TEST(QuantBackendTest, LinearManyAndEmbedding) {
  const QuantType type = QuantType::kQ4_K;
  const int64_t rows = 70, cols = 256, n = 5;
  const std::vector<uint8_t> blocks = RandomBlocks(type, rows, cols, 9);
  const std::vector<float> x = RandomActivations(n, cols, 1);
  std::vector<float> reference;
  for (int threads : {1, 2}) {
    CpuBackend backend(threads);
    auto w = backend.PrepareWeight(blocks.data(), DTypeOf(type), rows, cols, WeightUse::kLinear);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->layout, WeightLayout::kQuantTiles);
    std::vector<float> y1(n * rows), y2(n * rows);
    const LinearOutput outs[2] = {{&*w, nullptr, y1.data()}, {&*w, nullptr, y2.data()}};
    backend.LinearMany(x.data(), n, outs);
    if (reference.empty()) reference = RunKernel(&QuantLinearPortable, *w, x, n, nullptr);
    EXPECT_EQ(y1, reference);
    EXPECT_EQ(y2, reference);
    std::vector<float> y3(n * rows);
    backend.Linear(x.data(), n, *w, nullptr, y3.data());
    EXPECT_EQ(y3, reference);

    auto table = backend.PrepareWeight(blocks.data(), DTypeOf(type), rows, cols, WeightUse::kTable);
    ASSERT_TRUE(table.ok());
    const int32_t ids[3] = {69, 0, 17};
    std::vector<float> emb(3 * cols);
    backend.Embedding(*table, ids, 3, emb.data());
    const std::vector<float> w_ref = Dequantized(type, blocks, rows, cols);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(std::equal(emb.begin() + i * cols, emb.begin() + (i + 1) * cols,
                             w_ref.begin() + ids[i] * cols));
      EXPECT_EQ(WeightAt(*table, ids[i] * cols + 100), w_ref[ids[i] * cols + 100]);
    }
  }
}

}  // namespace
}  // namespace tessera::cpu
