// The row-major GEMM wrapper on cuBLAS against a CPU GEMM (the Linear twin,
// double accumulation), for f32, f16 and bf16 operands at several shapes,
// and the strided-batched form. Tolerance: 1e-4 relative (floor 1) for f32
// operands (f32 accumulation over k ≤ 5632); 1e-3 for 16-bit operands (the
// twin rounds the inputs exactly as the device does; only the accumulation
// order differs).
#include "engine/backend/cuda/gemm.h"

#include <random>

#include "engine/backend/cuda/kernels.h"
#include "engine/backend/cuda/twins.h"
#include "gpu/gpu_test_util.h"
#include "testing/attention_case.h"

namespace tessera::cuda {
namespace {

using namespace tessera::cuda::testing;
using tessera::testing::RandomFloats;

class GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSERA_REQUIRE_GPU();
    auto handle = CublasHandle::Create(nullptr);
    ASSERT_TRUE(handle.ok()) << handle.status();
    cublas_ = std::move(*handle);
  }
  CublasHandle cublas_;
  std::mt19937_64 rng_{99};
};

TEST_F(GemmTest, LinearShapesMatchTheCpu) {
  const std::vector<std::tuple<int32_t, int64_t, int64_t>> shapes = {
      {1, 1, 1},        {1, 2048, 2048}, {3, 256, 2048}, {16, 5632, 2048},
      {64, 2048, 5632}, {7, 32000, 64},  {130, 96, 72}};
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto [n, rows, cols] : shapes) {
      const std::vector<float> x = RandomFloats(size_t(n) * cols, rng_);
      const std::vector<uint8_t> w = Encode(RandomFloats(rows * cols, rng_, 0.05f), dtype);
      std::vector<float> want(size_t(n) * rows);
      twin::Linear(x.data(), n, w.data(), dtype, rows, cols, want.data());
      DeviceBuffer dx = Upload(x), dw = Upload(w), dy = Zeros(want.size() * 4);
      DeviceBuffer dxh = Zeros(x.size() * 2);
      const void* a = dx.data();
      if (dtype != DType::kF32) {
        ASSERT_TRUE(LaunchConvert(dx.as<float>(), x.size(), dtype, dxh.data(), nullptr).ok());
        a = dxh.data();
      }
      GemmOperands op;
      op.shape = RowMajorGemm{n, rows, cols, true, cols, cols, rows};
      op.ab_dtype = dtype, op.a = a, op.b = dw.data(), op.c = dy.as<float>();
      ASSERT_TRUE(GemmRowMajor(cublas_.get(), op).ok());
      const float tol = dtype == DType::kF32 ? 1e-4f : 1e-3f;
      EXPECT_LE(MaxRelDiff(Download<float>(dy, want.size()), want), tol)
          << DTypeName(dtype) << " " << n << "x" << rows << "x" << cols;
    }
  }
}

TEST_F(GemmTest, StridedBatchedWithPlainAndTransposedB) {
  for (bool b_transposed : {false, true}) {
    const int64_t batch = 5, m = 9, n = 33, k = 20;
    const std::vector<float> a = RandomFloats(batch * m * k, rng_);
    const std::vector<float> b = RandomFloats(batch * n * k, rng_);
    std::vector<float> want(batch * m * n);
    for (int64_t i = 0; i < batch; ++i) {
      // The twin computes x · wᵀ with w [rows, cols]; a plain B [k, n] is
      // transposed into that form first.
      std::vector<float> wt(n * k);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
          wt[r * k + c] = b_transposed ? b[i * n * k + r * k + c] : b[i * n * k + c * n + r];
        }
      }
      twin::Linear(a.data() + i * m * k, m, wt.data(), DType::kF32, n, k, want.data() + i * m * n);
    }
    DeviceBuffer da = Upload(a), db = Upload(b), dc = Zeros(want.size() * 4);
    GemmOperands op;
    op.shape = RowMajorGemm{m, n, k, b_transposed, k, b_transposed ? k : n, n};
    op.a = da.data(), op.b = db.data(), op.c = dc.as<float>();
    op.batch = batch, op.stride_a = m * k, op.stride_b = n * k, op.stride_c = m * n;
    ASSERT_TRUE(GemmRowMajor(cublas_.get(), op).ok());
    EXPECT_LE(MaxRelDiff(Download<float>(dc, want.size()), want), 1e-4f) << b_transposed;
  }
}

TEST_F(GemmTest, BadShapesAreErrorsNotCrashes) {
  GemmOperands op;
  op.shape = RowMajorGemm{4, 4, 4, true, 3, 4, 4};  // lda < k
  EXPECT_EQ(GemmRowMajor(cublas_.get(), op).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::cuda
