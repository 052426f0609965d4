#include "engine/backend/cuda/gemm.h"

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/device.h"

namespace tessera::cuda {
namespace {

cudaDataType_t CudaType(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
    default:  // f32 (quantized types are never device activations)
      break;
  }
  return CUDA_R_32F;
}

cublasOperation_t CublasOperation(CublasOp op) {
  return op == CublasOp::kT ? CUBLAS_OP_T : CUBLAS_OP_N;
}

}  // namespace

absl::Status GemmRowMajor(cublasHandle_t handle, const GemmOperands& op) {
  if (!ValidRowMajorGemm(op.shape) || op.batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad GEMM shape ", op.shape.m, "x", op.shape.n,
                                                   "x", op.shape.k, " batch ", op.batch));
  }
  const ColumnMajorGemm c = ToColumnMajor(op.shape);
  const cudaDataType_t ab = CudaType(op.ab_dtype);
  // cuBLAS's first operand is our B and its second our A (gemm_params.h).
  if (op.batch == 1) {
    return CublasStatus(
        cublasGemmEx(handle, CublasOperation(c.transa), CublasOperation(c.transb), c.m, c.n, c.k,
                     &op.alpha, op.b, ab, c.lda, op.a, ab, c.ldb, &op.beta, op.c, CUDA_R_32F, c.ldc,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  }
  return CublasStatus(
      cublasGemmStridedBatchedEx(handle, CublasOperation(c.transa), CublasOperation(c.transb), c.m,
                                 c.n, c.k, &op.alpha, op.b, ab, c.lda, op.stride_b, op.a, ab, c.ldb,
                                 op.stride_a, &op.beta, op.c, CUDA_R_32F, c.ldc, op.stride_c,
                                 op.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

}  // namespace tessera::cuda
