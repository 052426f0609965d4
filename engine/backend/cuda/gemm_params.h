// The one place where Tessera's row-major matrices meet cuBLAS's
// column-major convention. Pure arithmetic, no CUDA: the mapping is unit
// tested on the CPU (tests/cuda_gemm_params_test.cc).
//
// A row-major matrix X[r, c] with leading dimension ld is, read as
// column-major, the matrix Xᵀ[c, r] with the same ld. So the row-major
// product C = A · op(B) is the column-major product Cᵀ = op(B)ᵀ · Aᵀ:
// cuBLAS is called with the operands swapped (B first, then A), m and n
// swapped, and every leading dimension passed through unchanged.
#pragma once

#include <cstdint>

namespace tessera::cuda {

// Row-major C[m, n] = A[m, k] · B'[k, n], where B' = B when B is stored
// [k, n] (b_transposed false), or B' = Bᵀ when B is stored [n, k]
// (b_transposed true: a linear layer's weights [out, in], or keys [T_k, d]
// in Q·Kᵀ). Leading dimensions are in elements, of the matrices as stored.
struct RowMajorGemm {
  int64_t m = 0, n = 0, k = 0;
  bool b_transposed = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

enum class CublasOp { kN, kT };

// The arguments of cublasGemmEx(handle, transa, transb, m, n, k, alpha,
// A, lda, B, ldb, beta, C, ldc): its "A" is our B and its "B" is our A.
struct ColumnMajorGemm {
  CublasOp transa = CublasOp::kN;  // applies to our B
  CublasOp transb = CublasOp::kN;  // applies to our A
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0;  // our ldb
  int64_t ldb = 0;  // our lda
  int64_t ldc = 0;
};

inline ColumnMajorGemm ToColumnMajor(const RowMajorGemm& g) {
  ColumnMajorGemm c;
  // Cᵀ[n, m] = B'ᵀ[n, k] · Aᵀ[k, m]. Stored B read column-major is Bᵀ: when
  // B is [k, n] that is B'ᵀ already (no transpose); when B is [n, k] it is
  // [k, n] column-major and must be transposed to give B'ᵀ = B.
  c.transa = g.b_transposed ? CublasOp::kT : CublasOp::kN;
  c.transb = CublasOp::kN;  // stored A read column-major is Aᵀ[k, m]
  c.m = g.n;
  c.n = g.m;
  c.k = g.k;
  c.lda = g.ldb;
  c.ldb = g.lda;
  c.ldc = g.ldc;
  return c;
}

// Row-major leading dimensions are at least the row length, as cuBLAS
// requires of the column-major ones they become.
inline bool ValidRowMajorGemm(const RowMajorGemm& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return false;
  const int64_t b_cols = g.b_transposed ? g.k : g.n;
  return g.lda >= g.k && g.ldb >= b_cols && g.ldc >= g.n;
}

}  // namespace tessera::cuda
