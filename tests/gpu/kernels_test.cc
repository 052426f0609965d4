// Each elementwise, norm and lookup kernel against its CPU twin, on fresh
// random inputs at several shapes.
// Tolerances: lookups, adds, bias and conversions are exact; RMSNorm and
// LayerNorm agree to 1e-5 relative (double sums in another order); RoPE,
// SwiGLU and GELU to 2e-6 relative (device expf/tanhf/cos within 2 ulp, and
// fused multiply-adds).
#include "engine/backend/cuda/kernels.h"

#include <random>

#include "engine/backend/cuda/twins.h"
#include "gpu/gpu_test_util.h"
#include "testing/attention_case.h"

namespace tessera::cuda {
namespace {

using namespace tessera::cuda::testing;
using tessera::testing::RandomFloats;

class KernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { TESSERA_REQUIRE_GPU(); }
  std::mt19937_64 rng_{4242};
};

TEST_F(KernelsTest, EmbeddingAndPositionsAreExact) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t dim : {1, 64, 2048, 2049}) {
      const int64_t vocab = 37;
      const std::vector<uint8_t> table = Encode(RandomFloats(vocab * dim, rng_), dtype);
      const std::vector<int32_t> ids = {0, 36, 5, 5, 17};
      const int32_t n = static_cast<int32_t>(ids.size());
      std::vector<float> want(n * dim);
      twin::Embedding(table.data(), dtype, dim, ids.data(), n, want.data());
      DeviceBuffer t = Upload(table), d_ids = Upload(ids), out = Zeros(n * dim * 4);
      ASSERT_TRUE(
          LaunchEmbedding(t.data(), dtype, dim, d_ids.as<int32_t>(), n, out.as<float>(), nullptr)
              .ok());
      EXPECT_EQ(Download<float>(out, n * dim), want) << DTypeName(dtype) << " dim " << dim;
      twin::AddPositionEmbedding(want.data(), table.data(), dtype, dim, ids.data(), n);
      ASSERT_TRUE(LaunchAddPositionEmbedding(out.as<float>(), t.data(), dtype, dim,
                                             d_ids.as<int32_t>(), n, nullptr)
                      .ok());
      EXPECT_EQ(Download<float>(out, n * dim), want);
    }
  }
}

TEST_F(KernelsTest, NormsMatchTheirTwins) {
  for (int64_t dim : {8, 63, 288, 2048, 5632}) {
    for (int32_t n : {1, 3, 70}) {
      const std::vector<float> x = RandomFloats(n * dim, rng_, 2.0f);
      const std::vector<float> w = RandomFloats(dim, rng_), b = RandomFloats(dim, rng_);
      DeviceBuffer dx = Upload(x), dw = Upload(w), db = Upload(b), out = Zeros(n * dim * 4);
      std::vector<float> want(n * dim);
      twin::RmsNorm(x.data(), w.data(), 1e-5f, n, dim, want.data());
      ASSERT_TRUE(
          LaunchRmsNorm(dx.as<float>(), dw.as<float>(), 1e-5f, n, dim, out.as<float>(), nullptr)
              .ok());
      EXPECT_LE(MaxRelDiff(Download<float>(out, n * dim), want), 1e-5f) << "rms " << dim;
      twin::LayerNorm(x.data(), w.data(), b.data(), 1e-5f, n, dim, want.data());
      ASSERT_TRUE(LaunchLayerNorm(dx.as<float>(), dw.as<float>(), db.as<float>(), 1e-5f, n, dim,
                                  out.as<float>(), nullptr)
                      .ok());
      EXPECT_LE(MaxRelDiff(Download<float>(out, n * dim), want), 1e-5f) << "layer " << dim;
    }
  }
}

TEST_F(KernelsTest, RopeMatchesItsTwin) {
  for (auto [heads, head_dim, rot_dim] : {std::tuple{1, 8, 8}, {32, 64, 64}, {4, 128, 64}}) {
    const std::vector<int32_t> pos = {0, 1, 7, 300, 2047, 4095, 12};
    const int32_t n = static_cast<int32_t>(pos.size());
    const std::vector<float> x = RandomFloats(size_t(n) * heads * head_dim, rng_);
    std::vector<float> want = x;
    twin::Rope(want.data(), n, heads, head_dim, rot_dim, 10000.0f, pos.data());
    DeviceBuffer dx = Upload(x), dp = Upload(pos);
    ASSERT_TRUE(
        LaunchRope(dx.as<float>(), n, heads, head_dim, rot_dim, 10000.0f, dp.as<int32_t>(), nullptr)
            .ok());
    EXPECT_LE(MaxRelDiff(Download<float>(dx, x.size()), want), 2e-6f) << heads << "x" << head_dim;
  }
}

TEST_F(KernelsTest, RopeExtMatchesItsTwin) {
  for (auto [heads, head_dim, rot_dim] : {std::tuple{2, 16, 16}, {8, 128, 128}, {4, 64, 32}}) {
    const std::vector<int32_t> pos = {0, 3, 100, 4095, 9};
    const int32_t n = static_cast<int32_t>(pos.size());
    const std::vector<float> x = RandomFloats(size_t(n) * heads * head_dim, rng_);
    std::vector<float> factors(rot_dim / 2);
    for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.25f * i;
    DeviceBuffer df = Upload(factors);
    for (RopeStyle style : {RopeStyle::kAdjacent, RopeStyle::kNeox}) {
      std::vector<float> want = x;
      const float mscale = style == RopeStyle::kNeox ? 1.19f : 1.0f;  // Phi-3 long-rope
      twin::RopeExt(want.data(), n, heads, head_dim,
                    RopeSpec{rot_dim, 1000000.0f, 0.125f, style, factors.data(), mscale},
                    pos.data());
      DeviceBuffer dx = Upload(x), dp = Upload(pos);
      ASSERT_TRUE(LaunchRopeExt(dx.as<float>(), n, heads, head_dim,
                                RopeSpec{rot_dim, 1000000.0f, 0.125f, style, df.as<float>(),
                                         mscale},
                                dp.as<int32_t>(), nullptr)
                      .ok());
      EXPECT_LE(MaxRelDiff(Download<float>(dx, x.size()), want), 2e-6f) << heads << "x" << head_dim;
    }
  }
}

TEST_F(KernelsTest, GemmaOpsMatchTheirTwins) {
  for (int64_t count : {1, 1000, 1 << 20}) {
    const std::vector<float> g = RandomFloats(count, rng_, 4.0f), u = RandomFloats(count, rng_);
    DeviceBuffer dg = Upload(g), du = Upload(u), out = Zeros(count * 4);
    std::vector<float> want(count);
    twin::GeGlu(g.data(), u.data(), count, want.data());
    ASSERT_TRUE(LaunchGeGlu(dg.as<float>(), du.as<float>(), count, out.as<float>(), nullptr).ok());
    EXPECT_LE(MaxRelDiff(Download<float>(out, count), want), 2e-6f) << "geglu " << count;
    want = g;
    twin::Scale(want.data(), count, 3.5f);
    ASSERT_TRUE(LaunchScale(dg.as<float>(), count, 3.5f, nullptr).ok());
    EXPECT_EQ(Download<float>(dg, count), want) << "scale " << count;
    want = u;
    twin::Softcap(want.data(), count, 2.0f);
    ASSERT_TRUE(LaunchSoftcap(du.as<float>(), count, 2.0f, nullptr).ok());
    EXPECT_LE(MaxRelDiff(Download<float>(du, count), want), 2e-6f) << "softcap " << count;
  }
}

TEST_F(KernelsTest, ActivationsMatchTheirTwins) {
  for (int64_t count : {1, 1000, 5632 * 3, 1 << 20}) {
    const std::vector<float> g = RandomFloats(count, rng_, 4.0f), u = RandomFloats(count, rng_);
    DeviceBuffer dg = Upload(g), du = Upload(u), out = Zeros(count * 4);
    std::vector<float> want(count);
    twin::SwiGlu(g.data(), u.data(), count, want.data());
    ASSERT_TRUE(LaunchSwiGlu(dg.as<float>(), du.as<float>(), count, out.as<float>(), nullptr).ok());
    EXPECT_LE(MaxRelDiff(Download<float>(out, count), want), 2e-6f) << "swiglu " << count;
    want = g;
    twin::Gelu(want.data(), count);
    ASSERT_TRUE(LaunchGelu(dg.as<float>(), count, nullptr).ok());
    EXPECT_LE(MaxRelDiff(Download<float>(dg, count), want), 2e-6f) << "gelu " << count;
    want = u;
    twin::Add(want.data(), g.data(), count);
    DeviceBuffer dg2 = Upload(g);
    ASSERT_TRUE(LaunchAdd(du.as<float>(), dg2.as<float>(), count, nullptr).ok());
    EXPECT_EQ(Download<float>(du, count), want) << "add " << count;
  }
}

TEST_F(KernelsTest, BiasGatherAndConvertAreExact) {
  const int32_t n = 6;
  const int64_t cols = 1000;
  const std::vector<float> y = RandomFloats(n * cols, rng_), bias = RandomFloats(cols, rng_);
  std::vector<float> want = y;
  twin::AddBias(want.data(), bias.data(), n, cols);
  DeviceBuffer dy = Upload(y), db = Upload(bias);
  ASSERT_TRUE(LaunchAddBias(dy.as<float>(), db.as<float>(), n, cols, nullptr).ok());
  EXPECT_EQ(Download<float>(dy, n * cols), want);
  const std::vector<int32_t> rows = {5, 0, 2};
  std::vector<float> gathered(3 * cols);
  twin::GatherRows(want.data(), cols, rows.data(), 3, gathered.data());
  DeviceBuffer dr = Upload(rows), dst = Zeros(3 * cols * 4);
  ASSERT_TRUE(
      LaunchGatherRows(dy.as<float>(), cols, dr.as<int32_t>(), 3, dst.as<float>(), nullptr).ok());
  EXPECT_EQ(Download<float>(dst, 3 * cols), gathered);
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const std::vector<uint8_t> encoded = Encode(y, dtype);
    DeviceBuffer half = Zeros(encoded.size()), source = Upload(y);
    ASSERT_TRUE(LaunchConvert(source.as<float>(), n * cols, dtype, half.data(), nullptr).ok());
    EXPECT_EQ(Download<uint8_t>(half, encoded.size()), encoded) << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace tessera::cuda
