// KV append, paged decode attention and prefill attention chunks against
// their CPU twins, on random steps mixing decode and prefill rows, for f32
// and f16 caches and several head layouts (MHA and grouped-query).
// Tolerances (absolute, on outputs of magnitude ~1): KV append exact;
// decode 2e-5 (f32 dot products in another order); prefill 1e-4 with an f32
// cache and 3e-3 with f16 (the probabilities are rounded to f16 on both
// sides, but from f32 values that differ in the last bits).
#include "engine/backend/cuda/attention.h"

#include <random>

#include "engine/backend/cuda/twins.h"
#include "gpu/gpu_test_util.h"
#include "testing/attention_case.h"
#include "testing/float_compare.h"

namespace tessera::cuda {
namespace {

using namespace tessera::cuda::testing;
using tessera::testing::AttentionCase;
using tessera::testing::MakeAttentionCase;

using tessera::testing::MaxAbsDiff;

// A case's cache and plan on the device and on the host (the twins').
struct Fixture {
  Fixture(const AttentionCase& c, DType kv_dtype, size_t workspace, int32_t item_rows)
      : shape(c.shape),
        elems(size_t(c.num_blocks) * c.block_size * c.shape.num_kv_heads * c.shape.head_dim) {
    host_k.assign(elems, 0.0f), host_v.assign(elems, 0.0f);
    host = KvLayer{host_k.data(), host_v.data(),      kv_dtype,
                   c.block_size,  shape.num_kv_heads, shape.head_dim};
    dev_k = Zeros(elems * 4), dev_v = Zeros(elems * 4);
    dev = KvLayer{dev_k.data(), dev_v.data(),       kv_dtype,
                  c.block_size, shape.num_kv_heads, shape.head_dim};
    EXPECT_TRUE(
        PlanAttention(c.meta, {shape, DTypeSizeOf(kv_dtype), workspace, item_rows}, plan).ok());
    tables = Upload(plan.block_tables);
    decode = Upload(plan.decode);
    prefill = Upload(plan.prefill);
    this->workspace = Zeros(workspace);
  }
  void Append(const std::vector<float>& k, const std::vector<float>& v,
              const AttentionMetadata& meta) {
    twin::KvAppend(k.data(), v.data(), meta.slot_mapping.data(), meta.num_tokens, host);
    DeviceBuffer dk = Upload(k), dv = Upload(v), slots = Upload(meta.slot_mapping);
    EXPECT_TRUE(LaunchKvAppend(dk.as<float>(), dv.as<float>(), slots.as<int32_t>(), meta.num_tokens,
                               dev, nullptr)
                    .ok());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  AttentionShape shape;
  size_t elems;
  std::vector<float> host_k, host_v;
  KvLayer host, dev;
  DeviceBuffer dev_k, dev_v, tables, decode, prefill, workspace;
  AttentionPlan plan;
};

void CheckStep(const AttentionShape& shape, DType kv_dtype,
               const std::vector<std::pair<int32_t, int32_t>>& seqs, size_t workspace,
               int32_t item_rows) {
  const AttentionCase c = MakeAttentionCase(shape, 16, seqs, seqs.size() * 31 + shape.head_dim);
  Fixture f(c, kv_dtype, workspace, item_rows);
  f.Append(c.k_prefix, c.v_prefix, c.prefix_meta);
  f.Append(c.k, c.v, c.meta);
  const size_t bytes = f.elems * DTypeSizeOf(kv_dtype);
  EXPECT_EQ(Download<uint8_t>(f.dev_k, bytes),
            std::vector<uint8_t>(reinterpret_cast<uint8_t*>(f.host_k.data()),
                                 reinterpret_cast<uint8_t*>(f.host_k.data()) + bytes));
  std::vector<float> want(c.q.size(), 0.0f);
  twin::DecodeAttention(c.q.data(), f.host, shape, f.plan, want.data());
  twin::PrefillAttention(c.q.data(), f.host, shape, f.plan, want.data());
  DeviceBuffer q = Upload(c.q), out = Zeros(c.q.size() * 4);
  const size_t partial_floats = std::max<size_t>(1, f.plan.decode.size()) * shape.num_heads *
                                std::max(1, f.plan.max_decode_splits) * (shape.head_dim + 2);
  DeviceBuffer partials = Zeros(partial_floats * 4);
  ASSERT_TRUE(LaunchDecodeAttention(
                  q.as<float>(), f.dev, shape, f.tables.as<int32_t>(), f.decode.as<DecodeItem>(),
                  static_cast<int32_t>(f.plan.decode.size()), f.plan.max_decode_splits,
                  partials.as<float>(), out.as<float>(), nullptr)
                  .ok());
  auto cublas = CublasHandle::Create(nullptr);
  ASSERT_TRUE(cublas.ok());
  for (const PrefillChunk& chunk : f.plan.chunks) {
    ASSERT_TRUE(PrefillAttentionChunk(cublas->get(), q.as<float>(), f.dev, shape,
                                      f.tables.as<int32_t>(), f.prefill.as<PrefillItem>(), chunk,
                                      f.workspace.data(), out.as<float>(), nullptr)
                    .ok());
  }
  const std::vector<float> got = Download<float>(out, c.q.size());
  const float tol = kv_dtype == DType::kF32 ? 1e-4f : 3e-3f;
  EXPECT_LE(MaxAbsDiff(got, want), tol) << DTypeName(kv_dtype) << " heads " << shape.num_heads
                                        << "/" << shape.num_kv_heads << " d " << shape.head_dim;
}

class AttentionTest : public ::testing::Test {
 protected:
  void SetUp() override { TESSERA_REQUIRE_GPU(); }
};

TEST_F(AttentionTest, MixedStepsMatchTheTwins) {
  const std::vector<std::pair<int32_t, int32_t>> seqs = {{1, 1},  {1, 300}, {37, 37}, {5, 700},
                                                         {1, 17}, {64, 80}, {2, 2},   {1, 1025}};
  for (DType kv : {DType::kF32, DType::kF16}) {
    CheckStep({4, 4, 16, 0.25f}, kv, seqs, 64 << 20, 512);
    CheckStep({8, 2, 64, 0.125f}, kv, seqs, 64 << 20, 512);
    CheckStep({32, 4, 64, 0.125f}, kv, {{1, 2000}, {200, 200}, {1, 5}}, 256 << 20, 512);
    // Small items and workspace: sequences split across items and chunks.
    CheckStep({8, 2, 64, 0.125f}, kv, seqs, 1 << 20, 16);
    // Sliding windows: within a block, across blocks, past a decode split.
    for (int32_t window : {5, 40, 300}) {
      AttentionShape swa{8, 2, 64, 0.125f};
      swa.window = window;
      CheckStep(swa, kv, seqs, 64 << 20, 512);
      CheckStep(swa, kv, seqs, 1 << 20, 16);
    }
  }
}

// Runs the decode rows of `meta` over the fixture's cache; returns out.
std::vector<float> RunDecode(Fixture& f, const AttentionMetadata& meta,
                             const std::vector<float>& q) {
  AttentionPlan plan;
  EXPECT_TRUE(PlanAttention(meta, {f.shape, 2, 8 << 20, 512}, plan).ok());
  DeviceBuffer tables = Upload(plan.block_tables), items = Upload(plan.decode);
  DeviceBuffer dq = Upload(q), out = Zeros(q.size() * 4);
  DeviceBuffer partials = Zeros(plan.decode.size() * f.shape.num_heads * plan.max_decode_splits *
                                (f.shape.head_dim + 2) * 4);
  EXPECT_TRUE(
      LaunchDecodeAttention(dq.as<float>(), f.dev, f.shape, tables.as<int32_t>(),
                            items.as<DecodeItem>(), static_cast<int32_t>(plan.decode.size()),
                            plan.max_decode_splits, partials.as<float>(), out.as<float>(), nullptr)
          .ok());
  return Download<float>(out, q.size());
}

// A decode row's output does not depend on what else is in the step: the
// same sequence alone and among others gives bit-identical results.
TEST_F(AttentionTest, DecodeIsBatchInvariant) {
  const AttentionShape shape{8, 2, 64, 0.125f};
  const AttentionCase c = MakeAttentionCase(shape, 16, {{1, 777}, {1, 3}, {1, 1500}, {1, 9}}, 5);
  Fixture f(c, DType::kF16, 8 << 20, 512);
  f.Append(c.k_prefix, c.v_prefix, c.prefix_meta);
  f.Append(c.k, c.v, c.meta);
  const size_t row = size_t(shape.num_heads) * shape.head_dim;
  const std::vector<float> batched = RunDecode(f, c.meta, c.q);
  AttentionMetadata alone = c.meta;
  alone.seqs.resize(1);
  alone.num_tokens = 1;
  const std::vector<float> single =
      RunDecode(f, alone, std::vector<float>(c.q.begin(), c.q.begin() + row));
  EXPECT_EQ(std::vector<float>(batched.begin(), batched.begin() + row), single);
}

}  // namespace
}  // namespace tessera::cuda
