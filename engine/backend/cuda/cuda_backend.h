// The CUDA backend: f32 activations in device memory, weights uploaded once
// in the chosen dtype (quantized matrices of linear layers as the file's
// blocks), linear layers through cuBLAS (gemm.h) or, for quantized weights
// and decode batches, our GEMV on the blocks (quant_gemv.h), our own
// kernels for everything else (kernels.h, attention.h), and the paged KV
// pool on the device with the same block tables as the CPU.
//
// All work goes on one stream, in order. Ops cannot return errors (Backend's
// ops are void): the first failure is recorded, later ops are skipped, and
// ConsumeError() hands the failure to the engine after the step.
//
// Per-step metadata (slot mapping, block tables, attention items) is
// uploaded from pinned memory in two copies per step: the slot mapping by
// KvAppend of layer 0, the attention plan by the first Attention call after
// it. Every later layer reuses them. Workspaces are sized by
// ReserveWorkspace; a step within those limits allocates nothing.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/attention.h"
#include "engine/backend/cuda/attention_plan.h"
#include "engine/backend/cuda/device.h"

namespace tessera::cuda {

struct CudaBackendOptions {
  int device = 0;
  float gpu_memory_utilization = 0.9f;
  // Weight type of matrices and tables on the device; auto_dtype keeps
  // f16/bf16 weights as they are and stores f32 ones as f16 (vLLM's "auto").
  bool auto_dtype = true;
  DType dtype = DType::kF16;
  // Prefill expands a quantized weight into a scratch tile of at most this
  // many bytes (at least one row) at a time; tests shrink it to get many tiles.
  size_t dequant_tile_bytes = size_t{64} << 20;
};

class CudaBackend final : public Backend {
 public:
  // Fails without a usable device (the message says why).
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;
  std::string_view name() const override { return "cuda"; }

  absl::Status ReserveWorkspace(const StepLimits& limits) override;
  int64_t KvCacheBudgetBytes() const override;
  absl::Status ConsumeError() override;

  absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) override;
  absl::StatusOr<Weight> PrepareWeight(const void* host, DType dtype, int64_t rows, int64_t cols,
                                       WeightUse use, FileRange source = {}) override;
  absl::Status AllocateKvCache(const KvStorageShape& shape) override;
  void CopyToHost(const float* src, float* dst, size_t count) override;
  void CopyFromHost(const int32_t* src, int32_t* dst, size_t count) override;

  void Embedding(const Weight& table, const int32_t* ids, int32_t n, float* out) override;
  void RmsNorm(const float* x, const Weight& w, float eps, int32_t n, float* out) override;
  void LayerNorm(const float* x, const Weight& w, const Weight& b, float eps, int32_t n,
                 float* out) override;
  void Linear(const float* x, int32_t n, const Weight& w, const Weight* bias, float* y) override;
  using Backend::Rope;
  void RopeExt(float* x, int32_t n, int32_t heads, int32_t head_dim, const RopeSpec& spec,
               const int32_t* positions) override;
  void AddPositionEmbedding(float* x, const Weight& table, const int32_t* positions,
                            int32_t n) override;
  void KvAppend(int32_t layer, const float* k, const float* v,
                const AttentionMetadata& meta) override;
  void Attention(int32_t layer, const float* q, const AttentionShape& shape,
                 const AttentionMetadata& meta, float* out) override;
  void SwiGlu(const float* gate, const float* up, int64_t count, float* out) override;
  void GeGlu(const float* gate, const float* up, int64_t count, float* out) override;
  void Gelu(float* x, int64_t count) override;
  void Scale(float* x, int64_t count, float s) override;
  void Softcap(float* x, int64_t count, float cap) override;
  void Add(float* x, const float* y, int64_t count) override;
  void GatherRows(const float* src, int64_t cols, const int32_t* rows, int32_t n,
                  float* dst) override;
  void Synchronize() override;

  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }

 private:
  CudaBackend(const CudaBackendOptions& options, Stream stream, CublasHandle cublas,
              Event slots_copied, Event plan_copied);
  // Records the first failure; true while no failure has been recorded.
  bool Record(absl::Status status);
  bool Ok() const { return error_.ok(); }
  // Every op but Linear starts here: it may write any buffer, so the cached
  // conversion of Linear's input is forgotten.
  bool Begin() {
    converted_x_ = nullptr;
    return Ok();
  }
  DType DeviceDtype(DType file_dtype) const;
  // Grows `buffer` to at least `bytes` (only when a step outgrows the
  // reserved limits, or no limits were reserved).
  absl::Status EnsureSize(DeviceBuffer& buffer, size_t bytes);
  absl::Status EnsureStaging(size_t slot_bytes, size_t plan_bytes);
  absl::Status UploadSlots(const AttentionMetadata& meta);
  absl::Status UploadPlan(const AttentionMetadata& meta, const AttentionShape& shape);
  KvLayer LayerCache(int32_t layer) const;
  // Every op but Linear may write activations, so a conversion is reused only
  // by back-to-back Linear calls on the same rows (Q/K/V, gate/up).
  void ForgetConversion() { converted_x_ = nullptr; }
  // x [count] rounded to `dtype` in convert_ (x itself for f32).
  absl::StatusOr<const void*> ConvertedInput(const float* x, int64_t count, DType dtype);
  // y[n, rows] (row stride ldc) = a[n, cols] · wᵀ through cuBLAS, a and w of
  // the float `dtype`.
  absl::Status DenseLinear(const void* a, int32_t n, const void* w, DType dtype, int64_t rows,
                           int64_t cols, int64_t ldc, float* y);
  // y = x · dequant(w)ᵀ for a weight kept in its GGUF blocks: the GEMV for
  // up to kQuantGemvMaxRows rows, else dequantization into dequant_ tile by
  // tile and cuBLAS.
  absl::Status QuantizedLinear(const float* x, int32_t n, const Weight& w, float* y);

  CudaBackendOptions options_;
  Stream stream_;
  CublasHandle cublas_;
  std::vector<DeviceBuffer> weights_;
  std::vector<std::pair<const void*, Weight>> uploaded_;  // host source → device weight
  DeviceBuffer convert_;                // activations rounded to a weight's type, [n, cols]
  const float* converted_x_ = nullptr;  // whose rows convert_ holds now (null: none)
  int64_t converted_count_ = 0;
  DType converted_dtype_ = DType::kF32;
  // A tile of a quantized weight expanded to DeviceDtype for prefill GEMMs;
  // sized by PrepareWeight for the largest tile of any quantized weight.
  DeviceBuffer dequant_;
  size_t largest_buffer_ = 0;

  KvStorageShape kv_shape_;
  DeviceBuffer k_cache_, v_cache_;  // [layers, blocks, kv_heads, block_size, head_dim]
  StepLimits limits_;
  int32_t item_rows_ = 512;  // query rows per prefill item (attention_plan.h)
  DeviceBuffer prefill_workspace_;
  DeviceBuffer decode_partials_;

  // Step metadata: pinned staging and its device copy, each region guarded
  // by the event of its last upload.
  PinnedBuffer slots_host_, plan_host_;
  DeviceBuffer slots_dev_, plan_dev_;
  Event slots_copied_, plan_copied_;
  bool plan_stale_ = true;
  AttentionPlan plan_;
  const int32_t* tables_dev_ = nullptr;
  const DecodeItem* decode_dev_ = nullptr;
  const PrefillItem* prefill_dev_ = nullptr;

  absl::Status error_;
};

}  // namespace tessera::cuda
