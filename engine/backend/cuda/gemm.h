// Row-major GEMM on cuBLAS with fp32 accumulation. Operands are row-major as
// everywhere in Tessera; ToColumnMajor (gemm_params.h) is the only place
// that translates them for cuBLAS.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/gemm_params.h"

namespace tessera::cuda {

// C[b] = alpha · A[b] · op(B[b]) + beta · C[b] for b in [0, batch), with A
// and B of `ab_dtype` (f32, f16 or bf16) and C f32; strides between batch
// items in elements (0 broadcasts one matrix to every item).
struct GemmOperands {
  RowMajorGemm shape;
  DType ab_dtype = DType::kF32;
  const void* a = nullptr;
  const void* b = nullptr;
  float* c = nullptr;
  float alpha = 1.0f;
  float beta = 0.0f;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Enqueues the product on the handle's stream. The algorithm is cuBLAS's
// default for the shape, with CUBLAS_COMPUTE_32F (no TF32): the same shape
// gives the same result every time.
absl::Status GemmRowMajor(cublasHandle_t handle, const GemmOperands& op);

}  // namespace tessera::cuda
