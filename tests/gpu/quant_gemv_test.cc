// Linear layers on quantized weights kept in their GGUF blocks
// (quant_gemv.h): the decode GEMV, the dequantization kernel and the
// backend's prefill path (tiles of dequantized rows through cuBLAS), each
// against twin::QuantLinear, for every quantized type, at several shapes
// (rows not a multiple of the 4 warps of a GEMV block, cols of 1 to 4
// superblocks, and a few 32-element blocks for the types that have them), with
// n = 1, 3, 8 (GEMV) and 17 (prefill).
// Tolerances, relative to Σ|w·x| of each output:
//   GEMV: kQuantGemvRelTol = 1e-5 (quant_case.h: f32 sums, bound 2.2e-6);
//     it should moreover equal the CPU emulation of its lanes bit for bit.
//   dequantization: exact (the reference floats rounded to nearest even).
//   prefill in f16: 1.5e-3: x and w each rounded to f16 (2⁻¹¹ apiece, so
//     ≤ 9.8e-4 per product) plus cuBLAS's f32 sums (≤ 1024 · 2⁻²⁴ = 6.1e-5);
//     against twin::Linear on the same f16 rounding: 1e-4 (the f32 sums only).
#include <random>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/quant_gemv.h"
#include "engine/backend/cuda/twins.h"
#include "gpu/gpu_test_util.h"
#include "gpu/quant_case.h"
#include "testing/attention_case.h"

namespace tessera::cuda {
namespace {

using namespace tessera::cuda::testing;
using tessera::testing::RandomFloats;

struct Case {
  int64_t rows, cols;
};

// rows: 1, and counts that leave a GEMV block partly empty; cols: 1 to 4
// superblocks, plus 3 blocks of 32 where the type allows.
std::vector<Case> CasesFor(QuantType type) {
  std::vector<Case> cases = {{1, 256}, {7, 512}, {37, 768}, {130, 1024}};
  if (quant::Info(type).block_elems == quant::kQK) cases.push_back({5, 96});
  return cases;
}

// max over outputs of |got − want| / Σ|w·x|.
double WorstRelative(const std::vector<float>& got, const std::vector<float>& want,
                     const std::vector<double>& magnitude) {
  double worst = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    worst = std::max(worst, std::fabs(double(got[k]) - want[k]) / std::max(magnitude[k], 1e-30));
  }
  return worst;
}

class QuantGemvTest : public ::testing::Test {
 protected:
  void SetUp() override { TESSERA_REQUIRE_GPU(); }
  std::mt19937_64 rng_{777};
};

TEST_F(QuantGemvTest, GemvMatchesTheTwin) {
  for (QuantType type : kAllQuantTypes) {
    for (const Case& c : CasesFor(type)) {
      const std::vector<uint8_t> blocks = RandomQuantBlocks(type, c.rows, c.cols, rng_);
      const std::vector<float> w = DequantizeRows(type, blocks, c.rows, c.cols);
      DeviceBuffer dw = Upload(blocks);
      for (int32_t n : {1, 3, 8}) {
        const std::vector<float> x = RandomFloats(n * c.cols, rng_);
        DeviceBuffer dx = Upload(x), dy = Zeros(n * c.rows * 4);
        ASSERT_TRUE(LaunchQuantGemv(dx.as<float>(), n, dw.data(), DTypeOf(type), c.rows, c.cols,
                                    dy.as<float>(), nullptr)
                        .ok());
        const std::vector<float> got = Download<float>(dy, n * c.rows);
        std::vector<float> want(n * c.rows);
        twin::QuantLinear(x.data(), n, blocks.data(), DTypeOf(type), c.rows, c.cols, want.data());
        const std::string where = std::string(quant::Info(type).name) + " " +
                                  std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                                  " n " + std::to_string(n);
        EXPECT_LE(WorstRelative(got, want, AbsProductSums(x, n, w, c.rows, c.cols)),
                  kQuantGemvRelTol)
            << where;
        EXPECT_EQ(got, EmulatedQuantGemv(x, n, blocks, type, c.rows, c.cols)) << where;
      }
    }
  }
}

TEST_F(QuantGemvTest, DequantizationIsExact) {
  for (QuantType type : kAllQuantTypes) {
    const int64_t rows = 37, cols = 512, first = 5, count = 19;  // and a tile of rows
    const std::vector<uint8_t> blocks = RandomQuantBlocks(type, rows, cols, rng_);
    const std::vector<float> w = DequantizeRows(type, blocks, rows, cols);
    DeviceBuffer dw = Upload(blocks);
    for (DType out : {DType::kF32, DType::kF16, DType::kBF16}) {
      DeviceBuffer dout = Zeros(rows * cols * 4);
      ASSERT_TRUE(
          LaunchDequantize(dw.data(), DTypeOf(type), rows, cols, out, dout.data(), nullptr).ok());
      std::vector<float> want(rows * cols), got(rows * cols);
      const std::vector<uint8_t> raw = Download<uint8_t>(dout, rows * cols * DTypeSizeOf(out));
      for (int64_t i = 0; i < rows * cols; ++i) {
        want[i] = twin::Round(w[i], out);
        got[i] = twin::Load(raw.data(), out, i);
      }
      EXPECT_EQ(got, want) << quant::Info(type).name << " to " << DTypeName(out);
      const auto* tile = dw.as<uint8_t>() + first * quant::RowBytes(type, cols);
      ASSERT_TRUE(
          LaunchDequantize(tile, DTypeOf(type), count, cols, out, dout.data(), nullptr).ok());
      const std::vector<uint8_t> part = Download<uint8_t>(dout, count * cols * DTypeSizeOf(out));
      for (int64_t i = 0; i < count * cols; ++i) got[i] = twin::Load(part.data(), out, i);
      got.resize(count * cols);
      EXPECT_EQ(got, std::vector<float>(want.begin() + first * cols,
                                        want.begin() + (first + count) * cols))
          << quant::Info(type).name << " tile to " << DTypeName(out);
    }
  }
}

// The launchers check their arguments before touching the device, so this
// runs without a GPU too.
TEST(QuantGemvArgs, LaunchersRejectBadShapes) {
  float* y = nullptr;
  // more than 8 rows; rows of part of a block or superblock; a float weight
  EXPECT_FALSE(LaunchQuantGemv(nullptr, 9, nullptr, DType::kQ4_0, 1, 32, y, nullptr).ok());
  EXPECT_FALSE(LaunchQuantGemv(nullptr, 1, nullptr, DType::kQ4_K, 1, 128, y, nullptr).ok());
  EXPECT_FALSE(LaunchQuantGemv(nullptr, 1, nullptr, DType::kIQ4_XS, 1, 128, y, nullptr).ok());
  EXPECT_FALSE(LaunchQuantGemv(nullptr, 1, nullptr, DType::kF16, 1, 32, y, nullptr).ok());
  EXPECT_FALSE(LaunchDequantize(nullptr, DType::kQ8_0, 1, 32, DType::kQ8_0, y, nullptr).ok());
  EXPECT_FALSE(LaunchDequantize(nullptr, DType::kQ5_0, 1, 48, DType::kF16, y, nullptr).ok());
  EXPECT_FALSE(LaunchDequantize(nullptr, DType::kQ2_K, 1, 96, DType::kF16, y, nullptr).ok());
  EXPECT_FALSE(LaunchDequantize(nullptr, DType::kIQ4_NL, 1, 48, DType::kF32, y, nullptr).ok());
  // nothing to do: no launch, no error
  EXPECT_TRUE(LaunchQuantGemv(nullptr, 0, nullptr, DType::kQ6_K, 4, 256, y, nullptr).ok());
}

// The backend keeps quantized linear weights in their blocks and runs n ≤ 8
// through the GEMV and n = 17 through tiles of dequantized f16 rows (tiles
// of 16 KiB here: several per matrix, the last one partial).
class QuantBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSERA_REQUIRE_GPU();
    CudaBackendOptions o;
    o.dequant_tile_bytes = 16 << 10;
    auto backend = CudaBackend::Create(o);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }
  std::unique_ptr<CudaBackend> backend_;
  std::mt19937_64 rng_{778};
};

TEST_F(QuantBackendTest, LinearMatchesTheTwin) {
  for (QuantType type : kAllQuantTypes) {
    for (const Case& c : CasesFor(type)) {
      if (c.rows == 1) continue;  // a one-row weight is a vector (f32)
      const std::vector<uint8_t> blocks = RandomQuantBlocks(type, c.rows, c.cols, rng_);
      const std::vector<float> w = DequantizeRows(type, blocks, c.rows, c.cols);
      auto weight = backend_->PrepareWeight(blocks.data(), DTypeOf(type), c.rows, c.cols,
                                            WeightUse::kLinear);
      ASSERT_TRUE(weight.ok()) << weight.status();
      EXPECT_EQ(weight->dtype, DTypeOf(type));
      EXPECT_EQ(weight->layout, WeightLayout::kRowMajor);
      for (int32_t n : {3, 17}) {
        const std::vector<float> x = RandomFloats(n * c.cols, rng_);
        auto dx = backend_->Allocate(x.size() * 4), dy = backend_->Allocate(n * c.rows * 4);
        ASSERT_TRUE(dx.ok() && dy.ok());
        ASSERT_EQ(cudaMemcpy((*dx)->data(), x.data(), x.size() * 4, cudaMemcpyHostToDevice),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the backend's stream does not wait
        backend_->Linear((*dx)->f32(), n, *weight, nullptr, (*dy)->f32());
        std::vector<float> got(n * c.rows), want(n * c.rows);
        backend_->CopyToHost((*dy)->f32(), got.data(), got.size());
        ASSERT_TRUE(backend_->ConsumeError().ok());
        twin::QuantLinear(x.data(), n, blocks.data(), DTypeOf(type), c.rows, c.cols, want.data());
        const std::vector<double> magnitude = AbsProductSums(x, n, w, c.rows, c.cols);
        const std::string where = std::string(quant::Info(type).name) + " " +
                                  std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                                  " n " + std::to_string(n);
        if (n <= kQuantGemvMaxRows) {
          EXPECT_LE(WorstRelative(got, want, magnitude), kQuantGemvRelTol) << where;
          continue;
        }
        EXPECT_LE(WorstRelative(got, want, magnitude), 1.5e-3) << where;
        const std::vector<uint8_t> w16 = Encode(w, DType::kF16);
        twin::Linear(x.data(), n, w16.data(), DType::kF16, c.rows, c.cols, want.data());
        EXPECT_LE(WorstRelative(got, want, magnitude), 1e-4) << where << " (f16 twin)";
      }
    }
  }
}

}  // namespace
}  // namespace tessera::cuda
