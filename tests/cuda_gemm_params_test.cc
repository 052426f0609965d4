// The row-major → column-major GEMM mapping (engine/backend/cuda/gemm_params.h),
// checked on the CPU: a reference column-major GEMM with cuBLAS's argument
// semantics, called with the mapped arguments, must compute the row-major
// product.
#include <random>
#include <vector>

#include "engine/backend/cuda/gemm_params.h"
#include "gtest/gtest.h"

namespace tessera::cuda {
namespace {

// C = op(A) · op(B), all column-major, as cublasGemmEx defines it (alpha 1,
// beta 0).
void ColumnMajorReference(const ColumnMajorGemm& g, const float* a, const float* b, float* c) {
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const float av = g.transa == CublasOp::kN ? a[i + p * g.lda] : a[p + i * g.lda];
        const float bv = g.transb == CublasOp::kN ? b[p + j * g.ldb] : b[j + p * g.ldb];
        sum += double(av) * bv;
      }
      c[i + j * g.ldc] = static_cast<float>(sum);
    }
  }
}

void CheckShape(int64_t m, int64_t n, int64_t k, bool b_transposed, int64_t pad) {
  std::mt19937 rng(static_cast<uint32_t>(m * 131 + n * 17 + k + pad));
  std::uniform_real_distribution<float> dist(-1, 1);
  const RowMajorGemm g{m, n, k, b_transposed, k + pad, (b_transposed ? k : n) + pad, n + pad};
  ASSERT_TRUE(ValidRowMajorGemm(g));
  std::vector<float> a(m * g.lda), b((b_transposed ? n : k) * g.ldb), c(m * g.ldc, -7.0f);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  const ColumnMajorGemm cm = ToColumnMajor(g);
  EXPECT_EQ(cm.m, n);
  EXPECT_EQ(cm.n, m);
  // cuBLAS's first operand is our B, its second our A.
  ColumnMajorReference(cm, b.data(), a.data(), c.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float bv = b_transposed ? b[j * g.ldb + p] : b[p * g.ldb + j];
        want += double(a[i * g.lda + p]) * bv;
      }
      ASSERT_NEAR(c[i * g.ldc + j], want, 1e-5)
          << m << "x" << n << "x" << k << " at " << i << "," << j;
    }
  }
}

TEST(CudaGemmParams, RowMajorProductWithTransposedB) {
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {1, 17, 5}, {7, 3, 9}, {16, 48, 32}, {5, 64, 1}}) {
    CheckShape(m, n, k, /*b_transposed=*/true, 0);
    CheckShape(m, n, k, /*b_transposed=*/true, 3);
  }
}

TEST(CudaGemmParams, RowMajorProductWithPlainB) {
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {3, 8, 2}, {9, 5, 33}, {32, 16, 64}}) {
    CheckShape(m, n, k, /*b_transposed=*/false, 0);
    CheckShape(m, n, k, /*b_transposed=*/false, 2);
  }
}

TEST(CudaGemmParams, LinearLayerMapping) {
  // y[n_tok, out] = x[n_tok, in] · Wᵀ with W stored [out, in].
  const ColumnMajorGemm c = ToColumnMajor({4, 96, 64, true, 64, 64, 96});
  EXPECT_EQ(c.transa, CublasOp::kT);
  EXPECT_EQ(c.transb, CublasOp::kN);
  EXPECT_EQ(c.m, 96);
  EXPECT_EQ(c.n, 4);
  EXPECT_EQ(c.k, 64);
  EXPECT_EQ(c.lda, 64);
  EXPECT_EQ(c.ldb, 64);
  EXPECT_EQ(c.ldc, 96);
}

TEST(CudaGemmParams, RejectsBadShapes) {
  EXPECT_FALSE(ValidRowMajorGemm({0, 4, 4, true, 4, 4, 4}));
  EXPECT_FALSE(ValidRowMajorGemm({2, 4, 8, true, 7, 8, 4}));   // lda < k
  EXPECT_FALSE(ValidRowMajorGemm({2, 4, 8, false, 8, 3, 4}));  // ldb < n
  EXPECT_FALSE(ValidRowMajorGemm({2, 4, 8, true, 8, 8, 3}));   // ldc < n
}

}  // namespace
}  // namespace tessera::cuda
