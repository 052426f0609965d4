// Each CPU backend op against a naive reference, on fresh random inputs.
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/kernels.h"
#include "engine/model/float16.h"
#include "gtest/gtest.h"
#include "testing/float_compare.h"

namespace tessera::cpu {
namespace {

std::vector<float> RandomVector(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Weight storage in a given dtype, plus its exact f32 values.
struct TypedMatrix {
  std::vector<float> f32;       // values after rounding to the dtype
  std::vector<uint16_t> half;   // f16 / bf16 storage
  Weight weight;
};

TypedMatrix MakeWeight(DType dtype, int64_t rows, int64_t cols, uint64_t seed) {
  TypedMatrix m;
  m.f32 = RandomVector(rows * cols, seed, 0.5f);
  if (dtype != DType::kF32) {
    m.half.resize(m.f32.size());
    for (size_t i = 0; i < m.f32.size(); ++i) {
      m.half[i] = dtype == DType::kF16 ? FloatToHalf(m.f32[i]) : FloatToBf16(m.f32[i]);
      m.f32[i] = dtype == DType::kF16 ? HalfToFloat(m.half[i]) : Bf16ToFloat(m.half[i]);
    }
    m.weight = Weight{m.half.data(), dtype, rows, cols};
  } else {
    m.weight = Weight{m.f32.data(), dtype, rows, cols};
  }
  return m;
}

using tessera::testing::MaxAbsDiff;

struct LinearCase {
  DType dtype;
  int64_t n, rows, cols;
};

class LinearTest : public ::testing::TestWithParam<LinearCase> {};

// Packs a row-major weight for linear layers, as the model loader does.
Weight Prepare(CpuBackend& backend, const TypedMatrix& m) {
  auto w = backend.PrepareWeight(m.weight.data, m.weight.dtype, m.weight.rows, m.weight.cols,
                                 WeightUse::kLinear);
  EXPECT_TRUE(w.ok());
  return *w;
}

TEST_P(LinearTest, MatchesNaiveProduct) {
  const LinearCase c = GetParam();
  CpuBackend backend(2);
  TypedMatrix w = MakeWeight(c.dtype, c.rows, c.cols, 7);
  const Weight packed = Prepare(backend, w);
  std::vector<float> x = RandomVector(c.n * c.cols, 11);
  std::vector<float> bias = RandomVector(c.rows, 13);
  Weight b{bias.data(), DType::kF32, 1, c.rows};
  std::vector<float> y(c.n * c.rows), ref(c.n * c.rows);
  backend.Linear(x.data(), c.n, packed, &b, y.data());
  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t j = 0; j < c.rows; ++j) {
      double acc = bias[j];
      for (int64_t k = 0; k < c.cols; ++k) acc += double(x[i * c.cols + k]) * w.f32[j * c.cols + k];
      ref[i * c.rows + j] = static_cast<float>(acc);
    }
  }
  // f32 accumulation over `cols` terms of magnitude ~0.5.
  EXPECT_LT(MaxAbsDiff(y, ref), 1e-4f * std::sqrt(float(c.cols)));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Values(LinearCase{DType::kF32, 1, 64, 64}, LinearCase{DType::kF32, 7, 33, 70},
                      LinearCase{DType::kF32, 13, 200, 48}, LinearCase{DType::kF16, 31, 130, 96},
                      LinearCase{DType::kF16, 1, 256, 768}, LinearCase{DType::kF16, 9, 100, 131},
                      LinearCase{DType::kBF16, 5, 64, 512}, LinearCase{DType::kBF16, 4, 17, 15},
                      // 6 + 2 rows, run as two tiles of 4
                      LinearCase{DType::kF16, 8, 70, 40}));

TEST(Linear, RowTilesCoverTheRowsWithoutTinyTailTiles) {
  for (int64_t n = 1; n <= 40; ++n) {
    std::vector<int64_t> tiles;
    int64_t next = 0;
    ForEachRowTile(n, [&](int64_t i, int64_t rows) {
      EXPECT_EQ(i, next) << n;
      tiles.push_back(rows);
      next = i + rows;
    });
    EXPECT_EQ(next, n);
    for (int64_t rows : tiles) {
      EXPECT_LE(rows, 6) << n;
      // A tile of one or two rows only when there are no more rows.
      if (n > 2) {
        EXPECT_GE(rows, 3) << n;
      }
    }
  }
}

TEST(Linear, RowResultDoesNotDependOnBatch) {
  CpuBackend backend(2);
  TypedMatrix w = MakeWeight(DType::kF16, 90, 200, 3);
  const Weight packed = Prepare(backend, w);
  std::vector<float> x = RandomVector(11 * 200, 5);
  std::vector<float> all(11 * 90), one(90);
  backend.Linear(x.data(), 11, packed, nullptr, all.data());
  for (int i = 0; i < 11; ++i) {
    backend.Linear(x.data() + i * 200, 1, packed, nullptr, one.data());
    for (int j = 0; j < 90; ++j) ASSERT_EQ(one[j], all[i * 90 + j]) << i << "," << j;
  }
}

TEST(Linear, PortableKernelAgreesWithSelected) {
  CpuBackend backend(1);
  TypedMatrix w = MakeWeight(DType::kBF16, 40, 100, 9);
  const Weight packed = Prepare(backend, w);
  std::vector<float> x = RandomVector(3 * 100, 10);
  std::vector<float> a(3 * 40), b(3 * 40);
  LinearPortable(x.data(), 3, packed, nullptr, a.data(), 0, NumPanels(40));
  SelectLinearKernel()(x.data(), 3, packed, nullptr, b.data(), 0, NumPanels(40));
  EXPECT_LT(MaxAbsDiff(a, b), 1e-4f);
}

// Every kernel path this CPU can run, on every dtype and a batch that takes
// each tile height, against the f64 product; and batch-invariant.
TEST(Linear, EveryPathMatchesNaiveProduct) {
  std::vector<LinearKernel> kernels = {&LinearPortable};
  if (CpuHasAvx2Kernels()) kernels.push_back(&LinearAvx2);
  if (CpuHasAvx512Kernels()) kernels.push_back(&LinearAvx512);
  CpuBackend backend(1);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    TypedMatrix w = MakeWeight(dtype, 37, 96, 21);
    const Weight packed = Prepare(backend, w);
    const int64_t n = 11;
    std::vector<float> x = RandomVector(n * 96, 22);
    for (LinearKernel kernel : kernels) {
      std::vector<float> y(n * 37), one(37);
      kernel(x.data(), n, packed, nullptr, y.data(), 0, NumPanels(37));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < 37; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < 96; ++k) acc += double(x[i * 96 + k]) * w.f32[j * 96 + k];
          ASSERT_NEAR(y[i * 37 + j], acc, 1e-4) << DTypeName(dtype) << " " << i << "," << j;
        }
        kernel(x.data() + i * 96, 1, packed, nullptr, one.data(), 0, NumPanels(37));
        ASSERT_TRUE(std::equal(one.begin(), one.end(), y.begin() + i * 37)) << i;
      }
    }
  }
}

TEST(Norms, RmsNormMatchesFormula) {
  CpuBackend backend(2);
  const int n = 3, dim = 48;
  auto x = RandomVector(n * dim, 1);
  auto wv = RandomVector(dim, 2);
  std::vector<float> out(n * dim);
  backend.RmsNorm(x.data(), Weight{wv.data(), DType::kF32, 1, dim}, 1e-5f, n, out.data());
  for (int i = 0; i < n; ++i) {
    double ss = 0;
    for (int c = 0; c < dim; ++c) ss += x[i * dim + c] * x[i * dim + c];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int c = 0; c < dim; ++c) EXPECT_NEAR(out[i * dim + c], x[i * dim + c] * inv * wv[c], 1e-5);
  }
}

TEST(Norms, LayerNormMatchesFormula) {
  CpuBackend backend(1);
  const int n = 2, dim = 40;
  auto x = RandomVector(n * dim, 3, 3.0f);
  auto wv = RandomVector(dim, 4);
  auto bv = RandomVector(dim, 5);
  std::vector<float> out(n * dim);
  backend.LayerNorm(x.data(), Weight{wv.data(), DType::kF32, 1, dim},
                    Weight{bv.data(), DType::kF32, 1, dim}, 1e-5f, n, out.data());
  for (int i = 0; i < n; ++i) {
    double mean = 0, var = 0;
    for (int c = 0; c < dim; ++c) mean += x[i * dim + c] / dim;
    for (int c = 0; c < dim; ++c) var += (x[i * dim + c] - mean) * (x[i * dim + c] - mean) / dim;
    for (int c = 0; c < dim; ++c) {
      const double ref = (x[i * dim + c] - mean) / std::sqrt(var + 1e-5) * wv[c] + bv[c];
      EXPECT_NEAR(out[i * dim + c], ref, 1e-4);
    }
  }
}

TEST(Rope, RotatesAdjacentPairsByPosition) {
  CpuBackend backend(1);
  const int n = 3, heads = 2, head_dim = 8, rot = 6;
  auto x = RandomVector(n * heads * head_dim, 6);
  auto y = x;
  const int32_t pos[] = {0, 5, 1000};
  backend.Rope(y.data(), n, heads, head_dim, rot, 10000.0f, pos);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < heads; ++h) {
      const float* a = x.data() + (i * heads + h) * head_dim;
      const float* b = y.data() + (i * heads + h) * head_dim;
      for (int p = 0; p < head_dim / 2; ++p) {
        if (2 * p >= rot) {  // dims past rot_dim pass through
          EXPECT_EQ(b[2 * p], a[2 * p]);
          continue;
        }
        const double th = pos[i] * std::pow(10000.0, -2.0 * p / rot);
        EXPECT_NEAR(b[2 * p], a[2 * p] * std::cos(th) - a[2 * p + 1] * std::sin(th), 1e-4);
        EXPECT_NEAR(b[2 * p + 1], a[2 * p] * std::sin(th) + a[2 * p + 1] * std::cos(th), 1e-4);
      }
    }
  }
}

// Gates far outside exp's range, infinities, NaN and a length that leaves a
// partial vector: silu(g)·u is 0 for very negative g and g·u for very large
// g; non-finite gates give what the scalar formula gives.
TEST(Activations, SwiGluExtremes) {
  CpuBackend backend(1);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> g = {-1e30f, -100.0f, -90.0f, 90.0f, 1e30f, -inf, inf,
                                std::nanf(""), 0.0f, 1e-30f, -5.0f, 5.0f, 20.0f,
                                -20.0f, 0.5f, -0.5f, 3.0f, -3.0f, 88.0f};
  const std::vector<float> u(g.size(), 2.0f);
  std::vector<float> out(g.size());
  backend.SwiGlu(g.data(), u.data(), static_cast<int64_t>(g.size()), out.data());
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i])) {
      // As the scalar formula: NaN stays NaN, silu(+inf) = +inf, and
      // silu(-inf) = -inf / (1 + inf) is NaN.
      const float scalar = g[i] / (1.0f + std::exp(-g[i])) * 2.0f;
      EXPECT_EQ(std::isnan(out[i]), std::isnan(scalar)) << "g = " << g[i];
      if (!std::isnan(scalar)) {
        EXPECT_EQ(out[i], scalar) << "g = " << g[i];
      }
    } else {
      const double ref = g[i] / (1 + std::exp(-double{g[i]})) * 2.0;
      EXPECT_NEAR(out[i], ref, 1e-6 * std::max(1.0, std::abs(ref))) << "g = " << g[i];
    }
  }
}

TEST(Activations, SwiGluAndGelu) {
  CpuBackend backend(2);
  auto g = RandomVector(1000, 7, 3.0f);
  auto u = RandomVector(1000, 8);
  std::vector<float> out(1000);
  backend.SwiGlu(g.data(), u.data(), 1000, out.data());
  for (int i = 0; i < 1000; ++i) EXPECT_NEAR(out[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-5);
  auto x = g;
  backend.Gelu(x.data(), 1000);
  for (int i = 0; i < 1000; ++i) {
    const double v = g[i];
    const double ref = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(x[i], ref, 1e-5);
  }
}

}  // namespace
}  // namespace tessera::cpu

namespace tessera::cpu {
namespace {

// bf16 products (the selected level's kernel: AVX512-BF16 or AMX-BF16)
// against a naive product of the bf16-rounded operands.
class AmxLinear : public ::testing::TestWithParam<LinearCase> {};

TEST_P(AmxLinear, MatchesProductOfRoundedOperands) {
  if (!SelectBf16LinearKernel()) GTEST_SKIP() << "no bf16 kernel at this kernel level";
  const LinearCase c = GetParam();
  CpuBackend backend(2, /*use_amx=*/true);
  TypedMatrix w = MakeWeight(c.dtype, c.rows, c.cols, 21);
  auto packed = backend.PrepareWeight(w.weight.data, c.dtype, c.rows, c.cols, WeightUse::kLinear);
  ASSERT_TRUE(packed.ok());
  ASSERT_EQ(packed->layout, WeightLayout::kAmx);
  std::vector<float> x = RandomVector(c.n * c.cols, 22);
  std::vector<float> bias = RandomVector(c.rows, 23);
  Weight b{bias.data(), DType::kF32, 1, c.rows};
  std::vector<float> y(c.n * c.rows);
  backend.Linear(x.data(), c.n, *packed, &b, y.data());
  float max_diff = 0.0f;
  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t j = 0; j < c.rows; ++j) {
      double acc = bias[j];
      for (int64_t k = 0; k < c.cols; ++k) {
        acc += double(Bf16ToFloat(FloatToBf16(x[i * c.cols + k]))) *
               Bf16ToFloat(FloatToBf16(w.f32[j * c.cols + k]));
      }
      max_diff = std::max(max_diff, std::fabs(y[i * c.rows + j] - float(acc)));
    }
  }
  EXPECT_LT(max_diff, 1e-3f * std::sqrt(float(c.cols)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AmxLinear,
                         ::testing::Values(LinearCase{DType::kF16, 1, 64, 64},
                                           LinearCase{DType::kF16, 17, 100, 96},
                                           // 6 + 6 + 2 rows: 6 + 4 + 4
                                           LinearCase{DType::kF16, 14, 100, 96},
                                           LinearCase{DType::kBF16, 40, 130, 768},
                                           LinearCase{DType::kF16, 70, 100, 300},
                                           // inputs not a multiple of 32, enough
                                           // rows to convert them in parallel
                                           LinearCase{DType::kF16, 64, 40, 1000},
                                           LinearCase{DType::kF32, 5, 48, 70}));

TEST(AmxLinearBatch, RowResultDoesNotDependOnBatch) {
  if (!SelectBf16LinearKernel()) GTEST_SKIP() << "no bf16 kernel at this kernel level";
  CpuBackend backend(2, /*use_amx=*/true);
  TypedMatrix w = MakeWeight(DType::kF16, 90, 200, 3);
  auto packed = backend.PrepareWeight(w.weight.data, DType::kF16, 90, 200, WeightUse::kLinear);
  ASSERT_TRUE(packed.ok());
  std::vector<float> x = RandomVector(37 * 200, 5);
  std::vector<float> all(37 * 90), one(90);
  backend.Linear(x.data(), 37, *packed, nullptr, all.data());
  for (int i = 0; i < 37; ++i) {
    backend.Linear(x.data() + i * 200, 1, *packed, nullptr, one.data());
    for (int j = 0; j < 90; ++j) ASSERT_EQ(one[j], all[i * 90 + j]) << i << "," << j;
  }
}

// LinearMany runs several products of one input as one job; each output
// must equal its own Linear call bit for bit, on the AMX path (odd sizes:
// partial panel groups at every boundary between outputs) and on the f32
// kernels.
void ExpectLinearManyEqualsLinear(bool use_amx) {
  CpuBackend backend(2, use_amx);
  const int64_t cols = 96, n = 19;
  const int64_t rows[] = {100, 36, 36};
  std::vector<TypedMatrix> ws;
  std::vector<Weight> packed;
  for (int i = 0; i < 3; ++i) ws.push_back(MakeWeight(DType::kF16, rows[i], cols, 40 + i));
  for (const TypedMatrix& w : ws) packed.push_back(Prepare(backend, w));
  std::vector<float> bias = RandomVector(rows[0], 50);
  Weight b{bias.data(), DType::kF32, 1, rows[0]};
  std::vector<float> x = RandomVector(n * cols, 51);
  std::vector<std::vector<float>> many(3), single(3);
  std::vector<LinearOutput> outputs;
  for (int i = 0; i < 3; ++i) {
    many[i].assign(n * rows[i], 0.0f);
    single[i].assign(n * rows[i], 1.0f);
    outputs.push_back({&packed[i], i == 0 ? &b : nullptr, many[i].data()});
  }
  backend.LinearMany(x.data(), n, outputs);
  for (int i = 0; i < 3; ++i) {
    backend.Linear(x.data(), n, packed[i], i == 0 ? &b : nullptr, single[i].data());
    EXPECT_EQ(many[i], single[i]) << "output " << i;
  }
}

TEST(LinearMany, EqualsSeparateLinearCalls) {
  ExpectLinearManyEqualsLinear(/*use_amx=*/false);
  if (!SelectBf16LinearKernel()) GTEST_SKIP() << "no bf16 kernel at this kernel level";
  ExpectLinearManyEqualsLinear(/*use_amx=*/true);
}

// Each bf16 kernel this CPU has, called directly (whatever the selected
// level): every row of a batch against the naive product of the rounded
// operands, and equal bit for bit to the same row computed alone, over
// panel ranges that split the panel groups. 10 panels: after [0, 1), two
// groups of 4 (the first asks for the second) and a panel alone; 13 rows
// run AVX512-BF16's group-major order, 30 its panel blocks, 1 the former.
void ExpectBf16KernelsMatch(int64_t n) {
  std::vector<std::pair<const char*, Bf16LinearKernel>> kernels;
  if (CpuHasAvx512Bf16()) kernels.push_back({"avx512-bf16", &LinearAvx512Bf16});
  if (AmxAvailable()) kernels.push_back({"amx", &LinearAmx});
  if (kernels.empty()) GTEST_SKIP() << "no AVX512-BF16 or AMX-BF16 on this CPU";
  const int64_t rows = 150, cols = 200, k_pad = AmxPaddedCols(cols);
  ThreadPool pool(1);
  TypedMatrix w = MakeWeight(DType::kF16, rows, cols, 61);
  std::vector<uint8_t> packed(AmxPackedBytes(rows, cols));
  const Weight pw{packed.data(), DType::kBF16, rows, cols, WeightLayout::kAmx};
  PackWeightAmx(w.weight.data, DType::kF16, pw, pool);
  const std::vector<float> x = RandomVector(n * cols, 62);
  std::vector<uint16_t> xb(n * k_pad);
  RowsToBf16Avx512(x.data(), n, cols, k_pad, xb.data());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < k_pad; ++c) {
      ASSERT_EQ(xb[i * k_pad + c], c < cols ? FloatToBf16(x[i * cols + c]) : 0) << i << "," << c;
    }
  }
  const int64_t panels = NumPanels(rows);
  for (const auto& [name, kernel] : kernels) {
    std::vector<float> all(n * rows, -1.0f), one(rows, -1.0f);
    kernel(xb.data(), k_pad, n, pw, nullptr, all.data(), 0, 1);
    kernel(xb.data(), k_pad, n, pw, nullptr, all.data(), 1, panels);
    for (int64_t i = 0; i < n; ++i) {
      kernel(xb.data() + i * k_pad, k_pad, 1, pw, nullptr, one.data(), 0, panels);
      for (int64_t j = 0; j < rows; ++j) {
        ASSERT_EQ(one[j], all[i * rows + j]) << name << " " << i << "," << j;
        double acc = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          acc += double(Bf16ToFloat(xb[i * k_pad + c])) *
                 Bf16ToFloat(FloatToBf16(w.f32[j * cols + c]));
        }
        EXPECT_NEAR(all[i * rows + j], acc, 1e-3 * std::sqrt(double(cols))) << name;
      }
    }
  }
}

TEST(Bf16Kernels, EveryKernelMatchesRoundedProductAndIsBatchInvariant) {
  ExpectBf16KernelsMatch(13);
}

TEST(Bf16Kernels, EveryKernelMatchesRoundedProductAndIsBatchInvariantPastGroupMajor) {
  ExpectBf16KernelsMatch(30);
}

// The CPUID/XGETBV checks (cpu_features.cc) agree with the flags Linux
// reports, which it also derives from CPUID and clears for state the OS does
// not save.
TEST(CpuFeatures, AgreeWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.rfind("flags", 0) != 0) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  std::istringstream words(line.substr(line.find(':') + 1));
  const std::set<std::string> flags{std::istream_iterator<std::string>(words), {}};
  auto has = [&](const char* f) { return flags.count(f) > 0; };
  const bool avx2 = has("avx2") && has("fma") && has("f16c");
  const bool avx512 = has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq") &&
                      has("fma") && has("f16c");
  EXPECT_EQ(CpuHasAvx2Kernels(), avx2);
  EXPECT_EQ(CpuHasAvx512Kernels(), avx512);
  EXPECT_EQ(CpuHasAvxVnni(), avx2 && has("avx_vnni"));
  EXPECT_EQ(CpuHasAvx512Vnni(), avx512 && has("avx512_vnni"));
  EXPECT_EQ(CpuHasAvx512Bf16(), avx512 && has("avx512_bf16"));
  if (!has("amx_tile") || !has("amx_bf16") || !avx512) {
    EXPECT_FALSE(AmxAvailable());
  }
}

}  // namespace
}  // namespace tessera::cpu
