// The CPU twins of the CUDA kernels (engine/backend/cuda/twins.h) against
// the CPU backend, on fresh random inputs at several shapes. The GPU tests
// (tests/gpu/) compare each kernel with its twin; this test ties the twins
// to the semantics the model already relies on, and runs without a GPU.
#include <cmath>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/attention_plan.h"
#include "engine/backend/cuda/twins.h"
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

// NEOX pairs, a linear frequency scale and per-pair factors (llama3).
TEST_F(CudaTwinsTest, RopeExtMatchesTheCpuBackend) {
  for (auto [heads, head_dim, rot_dim] : {std::tuple{2, 16, 16}, {4, 64, 64}, {3, 48, 32}}) {
    const int32_t n = 6;
    std::vector<int32_t> pos = {0, 1, 5, 99, 1000, 4095};
    const std::vector<float> x = RandomFloats(size_t(n) * heads * head_dim, rng_);
    std::vector<float> factors(rot_dim / 2);
    for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.5f * i;
    for (RopeStyle style : {RopeStyle::kAdjacent, RopeStyle::kNeox}) {
      const RopeSpec spec{rot_dim, 500000.0f, 0.25f, style, factors.data()};
      std::vector<float> want = x, got = x;
      cpu_.RopeExt(want.data(), n, heads, head_dim, spec, pos.data());
      twin::RopeExt(got.data(), n, heads, head_dim, spec, pos.data());
      EXPECT_LE(MaxAbsDiff(want, got), 1e-6f) << heads << "x" << head_dim << " rot " << rot_dim;
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
