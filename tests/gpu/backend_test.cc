// CudaBackend through the Backend interface, as the model uses it: device
// buffers, host copies, linear layers with and without bias in every weight
// type (consecutive layers on the same input share one conversion), the KV
// budget, and errors reported through ConsumeError instead of crashing.
// Tolerances as in gemm_test.cc.
#include <random>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/twins.h"
#include "gpu/gpu_test_util.h"
#include "testing/attention_case.h"

namespace tessera::cuda {
namespace {

using namespace tessera::cuda::testing;
using tessera::testing::AttentionCase;
using tessera::testing::MakeAttentionCase;
using tessera::testing::RandomFloats;

class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSERA_REQUIRE_GPU();
    CudaBackendOptions o;
    o.auto_dtype = false;
    o.dtype = DType::kBF16;
    auto backend = CudaBackend::Create(o);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }
  std::unique_ptr<Buffer> Alloc(size_t bytes) {
    auto b = backend_->Allocate(bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : nullptr;
  }
  std::unique_ptr<CudaBackend> backend_;
  std::mt19937_64 rng_{5};
};

TEST_F(BackendTest, LinearLayersShareTheirInputConversion) {
  const int32_t n = 5;
  const int64_t cols = 256, rows = 96;
  const std::vector<float> x = RandomFloats(n * cols, rng_);
  auto dx = Alloc(x.size() * 4), dy = Alloc(n * rows * 4), dz = Alloc(n * rows * 4);
  std::vector<float> w1 = RandomFloats(rows * cols, rng_, 0.1f),
                     w2 = RandomFloats(rows * cols, rng_, 0.1f);
  const std::vector<float> bias = RandomFloats(rows, rng_);
  auto W1 = backend_->PrepareWeight(w1.data(), DType::kF32, rows, cols, WeightUse::kLinear);
  auto W2 = backend_->PrepareWeight(w2.data(), DType::kF32, rows, cols, WeightUse::kLinear);
  auto B = backend_->PrepareWeight(bias.data(), DType::kF32, 1, rows, WeightUse::kTable);
  ASSERT_TRUE(W1.ok() && W2.ok() && B.ok());
  EXPECT_EQ(W1->dtype, DType::kBF16);
  EXPECT_EQ(B->dtype, DType::kF32);
  ASSERT_EQ(cudaMemcpy(dx->data(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  // cudaMemcpy runs on the legacy default stream, which the backend's
  // non-blocking stream does not wait for.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  backend_->Linear(dx->f32(), n, *W1, &*B, dy->f32());
  backend_->Linear(dx->f32(), n, *W2, nullptr, dz->f32());
  std::vector<float> y(n * rows), z(n * rows), want_y(n * rows), want_z(n * rows);
  backend_->CopyToHost(dy->f32(), y.data(), y.size());
  backend_->CopyToHost(dz->f32(), z.data(), z.size());
  ASSERT_TRUE(backend_->ConsumeError().ok());
  std::vector<uint16_t> w1b(w1.size()), w2b(w2.size());
  for (size_t i = 0; i < w1.size(); ++i) {
    twin::Store(w1b.data(), DType::kBF16, i, w1[i]);
    twin::Store(w2b.data(), DType::kBF16, i, w2[i]);
  }
  twin::Linear(x.data(), n, w1b.data(), DType::kBF16, rows, cols, want_y.data());
  twin::AddBias(want_y.data(), bias.data(), n, rows);
  twin::Linear(x.data(), n, w2b.data(), DType::kBF16, rows, cols, want_z.data());
  EXPECT_LE(MaxRelDiff(y, want_y), 1e-3f);
  EXPECT_LE(MaxRelDiff(z, want_z), 1e-3f);
}

TEST_F(BackendTest, KvBudgetIsAFractionOfFreeMemory) {
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  const int64_t budget = backend_->KvCacheBudgetBytes();
  EXPECT_GT(budget, 0);
  EXPECT_LE(budget, static_cast<int64_t>(free));
}

TEST_F(BackendTest, ErrorsAreReportedNotFatal) {
  ASSERT_TRUE(backend_->AllocateKvCache({2, 4, 16, 2, 32, DType::kF16}).ok());
  AttentionMetadata meta;
  meta.num_tokens = 1;
  meta.slot_mapping = {0};
  auto k = Alloc(2 * 32 * 4);
  backend_->KvAppend(7, k->f32(), k->f32(), meta);  // no layer 7
  const absl::Status s = backend_->ConsumeError();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend_->ConsumeError().ok());  // consumed
  // Attention before ReserveWorkspace is refused the same way.
  backend_->KvAppend(0, k->f32(), k->f32(), meta);
  meta.seqs.push_back({0, 1, 1, nullptr});
  std::vector<int32_t> table = {0};
  meta.seqs[0].block_table = table.data();
  auto out = Alloc(4 * 32 * 4);
  backend_->Attention(0, out->f32(), {4, 2, 32, 0.1f}, meta, out->f32());
  EXPECT_EQ(backend_->ConsumeError().code(), absl::StatusCode::kFailedPrecondition);
}

// A CUDA call that failed, reported through CudaStatus and consumed, is not
// reported again by the next kernel launch (it would fail the next step).
TEST_F(BackendTest, AConsumedCudaErrorStaysConsumed) {
  auto x = Alloc(4 * 4);
  const absl::Status bad = CudaStatus(
      cudaMemcpy(x->data(), x->data(), 4, static_cast<cudaMemcpyKind>(99)), "a bad copy");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInternal);
  backend_->Add(x->f32(), x->f32(), 4);
  backend_->Synchronize();
  EXPECT_TRUE(backend_->ConsumeError().ok());
}

// KV append and attention through the backend (the per-step uploads of the
// slot mapping and the attention plan included) against the CPU backend,
// over two consecutive steps. Tolerance 1e-4 (f32 cache); 5e-3 with f16,
// where the GPU also rounds Q and the probabilities to f16 (the CPU does not).
TEST_F(BackendTest, AttentionStepsMatchTheCpuBackend) {
  const AttentionShape shape{8, 2, 64, 0.125f};
  for (DType kv : {DType::kF32, DType::kF16}) {
    const AttentionCase c =
        MakeAttentionCase(shape, 16, {{1, 300}, {40, 40}, {1, 17}, {7, 600}, {1, 1}}, 11);
    ASSERT_TRUE(backend_->ReserveWorkspace({512, 16, 2048, shape}).ok());
    ASSERT_TRUE(backend_->AllocateKvCache({1, c.num_blocks, 16, 2, 64, kv}).ok());
    cpu::CpuBackend cpu(2);
    ASSERT_TRUE(cpu.AllocateKvCache({1, c.num_blocks, 16, 2, 64, kv}).ok());
    auto upload = [&](const std::vector<float>& v) {
      auto b = Alloc(std::max<size_t>(4, v.size() * 4));
      EXPECT_EQ(cudaMemcpy(b->data(), v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // before the backend's stream reads it
      return b;
    };
    auto kp = upload(c.k_prefix), vp = upload(c.v_prefix), k = upload(c.k), v = upload(c.v);
    auto q = upload(c.q), out = Alloc(c.q.size() * 4);
    std::vector<float> want(c.q.size()), got(c.q.size());
    cpu.KvAppend(0, c.k_prefix.data(), c.v_prefix.data(), c.prefix_meta);
    cpu.KvAppend(0, c.k.data(), c.v.data(), c.meta);
    cpu.Attention(0, c.q.data(), shape, c.meta, want.data());
    backend_->KvAppend(0, kp->f32(), vp->f32(), c.prefix_meta);  // a step of its own
    for (int step = 0; step < 2; ++step) {  // the same step twice: re-uploads, same result
      backend_->KvAppend(0, k->f32(), v->f32(), c.meta);
      backend_->Attention(0, q->f32(), shape, c.meta, out->f32());
      backend_->CopyToHost(out->f32(), got.data(), got.size());
      ASSERT_TRUE(backend_->ConsumeError().ok());
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_LE(worst, kv == DType::kF32 ? 1e-4f : 5e-3f) << DTypeName(kv) << " step " << step;
    }
  }
}

}  // namespace
}  // namespace tessera::cuda
