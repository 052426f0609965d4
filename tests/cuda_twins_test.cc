// The CPU twins of the CUDA kernels (engine/backend/cuda/twins.h) against
// the CPU backend, on fresh random inputs at several shapes. The GPU tests
// (tests/gpu/) compare each kernel with its twin; this test ties the twins
// to the semantics the model already relies on, and runs without a GPU.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/attention_plan.h"
#include "engine/backend/cuda/quant_math.h"
#include "engine/backend/cuda/twins.h"
#include "gpu/quant_case.h"
#include "gtest/gtest.h"
#include "testing/attention_case.h"
#include "testing/float_compare.h"

namespace tessera::cuda {
namespace {

using tessera::testing::AttentionCase;
using tessera::testing::MakeAttentionCase;
using tessera::testing::RandomFloats;

using tessera::testing::MaxAbsDiff;
using tessera::testing::MaxRelDiff;
using quant::QuantType;

class CudaTwinsTest : public ::testing::Test {
 protected:
  cpu::CpuBackend cpu_{1};
  std::mt19937_64 rng_{20261129};
};

TEST_F(CudaTwinsTest, NormsMatchTheCpuBackend) {
  for (int64_t dim : {8, 64, 260, 2048}) {
    const int32_t n = 5;
    const std::vector<float> x = RandomFloats(n * dim, rng_, 3.0f);
    const std::vector<float> w = RandomFloats(dim, rng_), b = RandomFloats(dim, rng_);
    const Weight wt{w.data(), DType::kF32, 1, dim}, bt{b.data(), DType::kF32, 1, dim};
    std::vector<float> want(n * dim), got(n * dim);
    cpu_.RmsNorm(x.data(), wt, 1e-5f, n, want.data());
    twin::RmsNorm(x.data(), w.data(), 1e-5f, n, dim, got.data());
    EXPECT_LE(MaxAbsDiff(want, got), 1e-5f) << "rmsnorm dim " << dim;
    cpu_.LayerNorm(x.data(), wt, bt, 1e-5f, n, want.data());
    twin::LayerNorm(x.data(), w.data(), b.data(), 1e-5f, n, dim, got.data());
    EXPECT_LE(MaxAbsDiff(want, got), 1e-5f) << "layernorm dim " << dim;
  }
}

TEST_F(CudaTwinsTest, ElementwiseOpsMatchTheCpuBackend) {
  for (int64_t count : {1, 33, 4096, 70000}) {
    const std::vector<float> g = RandomFloats(count, rng_, 4.0f), u = RandomFloats(count, rng_);
    std::vector<float> want(count), got(count);
    cpu_.SwiGlu(g.data(), u.data(), count, want.data());
    twin::SwiGlu(g.data(), u.data(), count, got.data());
    // Where the CPU has AVX-512 its SwiGLU takes e^x from a polynomial
    // (relative error ~2e-7 against expf); |silu(g)·u| < 4 here.
    EXPECT_LE(MaxAbsDiff(want, got), 2e-6f) << "swiglu " << count;
    want = g, got = g;
    cpu_.Gelu(want.data(), count);
    twin::Gelu(got.data(), count);
    // The AVX2 and AVX-512 paths compute gelu as x·sigmoid(2y) with the same
    // polynomial e^x; the portable path and the twin use tanhf, whose
    // 1 + tanh(y) cancels in the negative tail (absolute error ~3e-8·|x|).
    // So: relative error 4e-6, absolute below 1.
    EXPECT_LE(MaxRelDiff(want, got, 1.0), 4e-6) << "gelu " << count;
    want = g, got = g;
    cpu_.Add(want.data(), u.data(), count);
    twin::Add(got.data(), u.data(), count);
    EXPECT_EQ(MaxAbsDiff(want, got), 0.0f) << "add " << count;
  }
}

TEST_F(CudaTwinsTest, RopeMatchesTheCpuBackend) {
  for (auto [heads, head_dim, rot_dim] : {std::tuple{1, 8, 8}, {4, 64, 64}, {3, 48, 32}}) {
    const int32_t n = 7;
    std::vector<int32_t> pos = {0, 1, 2, 17, 100, 511, 2047};
    const std::vector<float> x = RandomFloats(size_t(n) * heads * head_dim, rng_);
    std::vector<float> want = x, got = x;
    cpu_.Rope(want.data(), n, heads, head_dim, rot_dim, 10000.0f, pos.data());
    twin::Rope(got.data(), n, heads, head_dim, rot_dim, 10000.0f, pos.data());
    EXPECT_LE(MaxAbsDiff(want, got), 1e-6f) << heads << "x" << head_dim << " rot " << rot_dim;
  }
}

// NEOX pairs, a linear frequency scale, per-pair factors (llama3) and an
// attention factor on cos and sin (Phi-3 long-rope).
TEST_F(CudaTwinsTest, RopeExtMatchesTheCpuBackend) {
  for (auto [heads, head_dim, rot_dim] : {std::tuple{2, 16, 16}, {4, 64, 64}, {3, 48, 32}}) {
    const int32_t n = 6;
    std::vector<int32_t> pos = {0, 1, 5, 99, 1000, 4095};
    const std::vector<float> x = RandomFloats(size_t(n) * heads * head_dim, rng_);
    std::vector<float> factors(rot_dim / 2);
    for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.5f * i;
    for (RopeStyle style : {RopeStyle::kAdjacent, RopeStyle::kNeox}) {
      for (float mscale : {1.0f, 1.19f}) {
        const RopeSpec spec{rot_dim, 500000.0f, 0.25f, style, factors.data(), mscale};
        std::vector<float> want = x, got = x;
        cpu_.RopeExt(want.data(), n, heads, head_dim, spec, pos.data());
        twin::RopeExt(got.data(), n, heads, head_dim, spec, pos.data());
        EXPECT_LE(MaxAbsDiff(want, got), 1e-6f) << heads << "x" << head_dim << " rot " << rot_dim;
        // The attention factor scales the rotated pairs only.
        const RopeSpec plain{rot_dim, 500000.0f, 0.25f, style, factors.data()};
        std::vector<float> unscaled = x;
        cpu_.RopeExt(unscaled.data(), n, heads, head_dim, plain, pos.data());
        EXPECT_NEAR(want[1], mscale * unscaled[1], 1e-5f);
        if (rot_dim < head_dim) {
          EXPECT_EQ(want[head_dim - 1], x[head_dim - 1]);  // not rotated, not scaled
        }
      }
    }
  }
}

TEST_F(CudaTwinsTest, GemmaOpsMatchTheCpuBackend) {
  for (int64_t count : {1, 33, 4096, 70000}) {
    const std::vector<float> g = RandomFloats(count, rng_, 4.0f), u = RandomFloats(count, rng_);
    std::vector<float> want(count), got(count);
    cpu_.GeGlu(g.data(), u.data(), count, want.data());
    twin::GeGlu(g.data(), u.data(), count, got.data());
    EXPECT_LE(MaxRelDiff(want, got, 1.0), 4e-6) << "geglu " << count;  // as gelu above
    want = g, got = g;
    cpu_.Scale(want.data(), count, 8.0f);
    twin::Scale(got.data(), count, 8.0f);
    EXPECT_EQ(MaxAbsDiff(want, got), 0.0f) << "scale " << count;
    want = g, got = g;
    cpu_.Softcap(want.data(), count, 3.0f);
    twin::Softcap(got.data(), count, 3.0f);
    EXPECT_LE(MaxAbsDiff(want, got), 1e-6f) << "softcap " << count;
  }
}

TEST_F(CudaTwinsTest, EmbeddingAndGatherMatchTheCpuBackend) {
  const int64_t vocab = 50, dim = 24;
  const std::vector<float> table = RandomFloats(vocab * dim, rng_);
  const Weight t{table.data(), DType::kF32, vocab, dim};
  const std::vector<int32_t> ids = {3, 0, 49, 3, 17};
  std::vector<float> want(ids.size() * dim), got(ids.size() * dim);
  cpu_.Embedding(t, ids.data(), 5, want.data());
  twin::Embedding(table.data(), DType::kF32, dim, ids.data(), 5, got.data());
  EXPECT_EQ(MaxAbsDiff(want, got), 0.0f);
  std::vector<float> pos_want = want, pos_got = got;
  cpu_.AddPositionEmbedding(pos_want.data(), t, ids.data(), 5);
  twin::AddPositionEmbedding(pos_got.data(), table.data(), DType::kF32, dim, ids.data(), 5);
  EXPECT_EQ(MaxAbsDiff(pos_want, pos_got), 0.0f);
  const std::vector<int32_t> rows = {4, 1};
  std::vector<float> g_want(2 * dim), g_got(2 * dim);
  cpu_.GatherRows(want.data(), dim, rows.data(), 2, g_want.data());
  twin::GatherRows(want.data(), dim, rows.data(), 2, g_got.data());
  EXPECT_EQ(MaxAbsDiff(g_want, g_got), 0.0f);
}

TEST_F(CudaTwinsTest, LinearMatchesTheCpuBackendInF32) {
  for (auto [n, rows, cols] : {std::tuple{1, 16, 8}, {3, 40, 64}, {9, 96, 260}}) {
    const std::vector<float> x = RandomFloats(size_t(n) * cols, rng_);
    const std::vector<float> w = RandomFloats(size_t(rows) * cols, rng_, 0.2f);
    auto packed = cpu_.PrepareWeight(w.data(), DType::kF32, rows, cols, WeightUse::kLinear);
    ASSERT_TRUE(packed.ok());
    std::vector<float> want(size_t(n) * rows), got(size_t(n) * rows);
    cpu_.Linear(x.data(), n, *packed, nullptr, want.data());
    twin::Linear(x.data(), n, w.data(), DType::kF32, rows, cols, got.data());
    EXPECT_LE(MaxAbsDiff(want, got), 1e-4f) << n << "x" << rows << "x" << cols;
  }
}

// KV append and attention of a whole step (decode and prefill rows mixed)
// through the twins and through the CPU backend.
void CheckAttention(const AttentionShape& shape, DType kv_dtype,
                    const std::vector<std::pair<int32_t, int32_t>>& seqs, float tolerance) {
  const AttentionCase c = MakeAttentionCase(shape, 16, seqs, 7 + seqs.size());
  cpu::CpuBackend cpu(1);
  ASSERT_TRUE(
      cpu.AllocateKvCache({1, c.num_blocks, 16, shape.num_kv_heads, shape.head_dim, kv_dtype})
          .ok());
  cpu.KvAppend(0, c.k_prefix.data(), c.v_prefix.data(), c.prefix_meta);
  cpu.KvAppend(0, c.k.data(), c.v.data(), c.meta);
  std::vector<float> want(c.q.size()), got(c.q.size(), -1.0f);
  cpu.Attention(0, c.q.data(), shape, c.meta, want.data());

  const size_t elems = size_t(c.num_blocks) * 16 * shape.num_kv_heads * shape.head_dim;
  std::vector<float> k_cache(elems), v_cache(elems);  // big enough for f16 too
  const KvLayer layer{k_cache.data(),     v_cache.data(), kv_dtype, 16,
                      shape.num_kv_heads, shape.head_dim};
  twin::KvAppend(c.k_prefix.data(), c.v_prefix.data(), c.prefix_meta.slot_mapping.data(),
                 c.prefix_meta.num_tokens, layer);
  twin::KvAppend(c.k.data(), c.v.data(), c.meta.slot_mapping.data(), c.meta.num_tokens, layer);
  AttentionPlan plan;
  // A small workspace and item size, so sequences split into several items
  // and chunks.
  const PlanLimits limits{shape, DTypeSizeOf(kv_dtype), 1 << 20, 24};
  ASSERT_TRUE(PlanAttention(c.meta, limits, plan).ok());
  twin::DecodeAttention(c.q.data(), layer, shape, plan, got.data());
  twin::PrefillAttention(c.q.data(), layer, shape, plan, got.data());
  EXPECT_LE(MaxAbsDiff(want, got), tolerance);
}

// twin::QuantLinear against the product computed apart: the whole matrix
// dequantized in one DequantizeRow call (rows of whole blocks follow each
// other), then summed in double. Both sums are double (error ~1e-13 of
// Σ|w·x|), and the twin rounds to float (2⁻²⁴ of |y| ≤ Σ|w·x|): 1e-7.
TEST_F(CudaTwinsTest, QuantLinearMatchesTheDequantizedProduct) {
  for (QuantType type : testing::kAllQuantTypes) {
    for (int64_t cols : {256, 768}) {
      const int64_t rows = 13;
      const int32_t n = 3;
      const std::vector<uint8_t> blocks = testing::RandomQuantBlocks(type, rows, cols, rng_);
      std::vector<float> w(rows * cols);
      quant::DequantizeRow(type, blocks.data(), w.data(), rows * cols);
      const std::vector<float> x = RandomFloats(n * cols, rng_);
      std::vector<float> got(n * rows);
      twin::QuantLinear(x.data(), n, blocks.data(), DTypeOf(type), rows, cols, got.data());
      for (int32_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
          double exact = 0, magnitude = 0;
          for (int64_t c = 0; c < cols; ++c) {
            exact += double(x[i * cols + c]) * w[r * cols + c];
            magnitude += std::fabs(double(x[i * cols + c]) * w[r * cols + c]);
          }
          EXPECT_NEAR(got[i * rows + r], exact, 1e-7 * magnitude)
              << quant::Info(type).name << " cols " << cols << " at " << i << "," << r;
        }
      }
    }
  }
}

// The per-element formulas the CUDA kernels run (quant_math.h, built here
// for the host) give DequantizeRow's floats bit for bit, with plausible
// scales and with random f16 bits (subnormal, huge, infinite, NaN).
TEST_F(CudaTwinsTest, DeviceDequantFormulasAreTheReference) {
  const int64_t rows = 3, cols = 1024;
  for (QuantType type : testing::kAllQuantTypes) {
    for (bool raw : {false, true}) {
      const std::vector<uint8_t> blocks =
          testing::RandomQuantBlocks(type, rows, cols, rng_, /*raw_scales=*/raw);
      const std::vector<float> want = testing::DequantizeRows(type, blocks, rows, cols);
      const int64_t row_bytes = quant::RowBytes(type, cols);
      int64_t mismatches = 0;
      testing::ForQuantType(type, [&]<QuantType T>() {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            const float got = DequantAt<T>(blocks.data() + r * row_bytes, c);
            const float ref = want[r * cols + c];
            const bool same = std::isnan(ref) ? std::isnan(got)
                                              : std::memcmp(&got, &ref, sizeof(float)) == 0;
            if (!same && mismatches++ == 0) {
              ADD_FAILURE() << quant::Info(type).name << " raw " << raw << " at " << r << ","
                            << c << ": " << got << " != " << ref;
            }
          }
        }
      });
      EXPECT_EQ(mismatches, 0) << quant::Info(type).name << " raw " << raw;
    }
  }
}

// The GEMV's lanes and warp tree, emulated on the CPU with the kernel's own
// code, against the twin within the GPU test's tolerance (quant_case.h):
// checks the kernel's indexing without a GPU.
TEST_F(CudaTwinsTest, EmulatedQuantGemvMatchesTheTwin) {
  for (QuantType type : testing::kAllQuantTypes) {
    const bool k_type = quant::Info(type).block_elems == quant::kQKK;
    for (int64_t cols : {96, 256, 1024}) {
      if (k_type && cols % quant::kQKK != 0) continue;
      for (int32_t n : {1, 3, 8}) {
        const int64_t rows = 5;
        const std::vector<uint8_t> blocks = testing::RandomQuantBlocks(type, rows, cols, rng_);
        const std::vector<float> x = RandomFloats(n * cols, rng_);
        const std::vector<float> got = testing::EmulatedQuantGemv(x, n, blocks, type, rows, cols);
        std::vector<float> want(n * rows);
        twin::QuantLinear(x.data(), n, blocks.data(), DTypeOf(type), rows, cols, want.data());
        const std::vector<double> magnitude = testing::AbsProductSums(
            x, n, testing::DequantizeRows(type, blocks, rows, cols), rows, cols);
        for (size_t k = 0; k < want.size(); ++k) {
          EXPECT_NEAR(got[k], want[k], testing::kQuantGemvRelTol * magnitude[k])
              << quant::Info(type).name << " cols " << cols << " n " << n << " at " << k;
        }
      }
    }
  }
}

TEST_F(CudaTwinsTest, AttentionMatchesTheCpuBackend) {
  const std::vector<std::pair<int32_t, int32_t>> seqs = {{1, 1},  {1, 300}, {37, 37}, {5, 700},
                                                         {1, 17}, {64, 80}, {2, 2}};
  for (DType kv : {DType::kF32, DType::kF16}) {
    const float tol = kv == DType::kF32 ? 2e-5f : 4e-3f;
    CheckAttention({4, 4, 16, 0.25f}, kv, seqs, tol);
    CheckAttention({8, 2, 32, 1.0f / std::sqrt(32.0f)}, kv, seqs, tol);
    CheckAttention({6, 1, 64, 0.125f}, kv, {{1, 513}, {100, 100}}, tol);
    // Sliding windows: shorter than a block, across blocks, past a decode split.
    for (int32_t window : {5, 40, 300}) {
      AttentionShape swa{8, 2, 32, 1.0f / std::sqrt(32.0f)};
      swa.window = window;
      CheckAttention(swa, kv, seqs, tol);
    }
  }
}

TEST_F(CudaTwinsTest, PlanSplitsItemsAndChunksWithinTheWorkspace) {
  const AttentionShape shape{8, 2, 32, 0.2f};
  const AttentionCase c = MakeAttentionCase(shape, 16, {{1, 40}, {50, 50}, {3, 900}, {1, 257}}, 3);
  const PlanLimits limits{shape, 2, 1100000, 16};
  AttentionPlan plan;
  ASSERT_TRUE(PlanAttention(c.meta, limits, plan).ok());
  ASSERT_EQ(plan.decode.size(), 2u);
  EXPECT_EQ(plan.decode[1].kv_len, 257);
  EXPECT_EQ(plan.max_decode_splits, NumDecodeSplits(257));
  ASSERT_EQ(plan.prefill.size(), 5u);  // 50 rows in items of 16 → 4, then 3 rows → 1
  EXPECT_EQ(plan.prefill[0].first_pos, 0);
  EXPECT_EQ(plan.prefill[3].rows, 2);
  EXPECT_EQ(plan.prefill[4].first_pos, 897);
  int32_t covered = 0;
  for (const PrefillChunk& ch : plan.chunks) {
    EXPECT_EQ(ch.first_item, covered);
    EXPECT_LE(LayoutChunk(ch.count, ch.tq, ch.tk, shape, 2).total, limits.workspace_bytes);
    EXPECT_EQ(ch.tk % kKeyPad, 0);
    covered += ch.count;
  }
  EXPECT_EQ(covered, 5);
  // A workspace too small for a single item is an error, not a crash.
  EXPECT_FALSE(PlanAttention(c.meta, {shape, 2, 1000, 16}, plan).ok());
}

}  // namespace
}  // namespace tessera::cuda
