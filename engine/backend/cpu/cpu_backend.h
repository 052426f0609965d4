// The CPU backend: float32 activations, f32/f16/bf16 weights used in place
// from the memory-mapped model file, a paged float32 KV cache, and a thread
// pool for every op that is big enough to split.
#pragma once

#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/attention_kernels.h"
#include "engine/backend/cpu/kernels.h"
#include "engine/backend/cpu/quant_linear.h"
#include "engine/util/page_populator.h"
#include "engine/util/thread_pool.h"

namespace tessera::cpu {

class CpuBackend final : public Backend {
 public:
  // use_bf16: linear layers of 16-bit and f32 weights in bf16, with the
  // selected level's bf16 kernel (the caller checks SelectBf16LinearKernel()
  // is not null); otherwise f32 products.
  explicit CpuBackend(int num_threads, bool use_bf16 = false);
  std::string_view name() const override { return "cpu"; }

  absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) override;
  // Linear weights are copied into 16-row panels (kernels.h), read from
  // `source` when it is given; tables are used in place from the mapped file.
  absl::StatusOr<Weight> PrepareWeight(const void* host, DType dtype, int64_t rows,
                                       int64_t cols, WeightUse use,
                                       FileRange source = {}) override;
  absl::Status AllocateKvCache(const KvStorageShape& shape) override;
  void CopyToHost(const float* src, float* dst, size_t count) override;
  void CopyFromHost(const int32_t* src, int32_t* dst, size_t count) override;

  void Embedding(const Weight& table, const int32_t* ids, int32_t n, float* out) override;
  void RmsNorm(const float* x, const Weight& w, float eps, int32_t n, float* out) override;
  void LayerNorm(const float* x, const Weight& w, const Weight& b, float eps, int32_t n,
                 float* out) override;
  void Linear(const float* x, int32_t n, const Weight& w, const Weight* bias, float* y) override;
  void LinearMany(const float* x, int32_t n, std::span<const LinearOutput> outputs) override;
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
  void Synchronize() override {}

  ThreadPool& pool() { return pool_; }

 private:
  template <typename T>
  void AttentionT(int32_t layer, const float* q, const AttentionShape& shape,
                  const AttentionMetadata& meta, float* out);
  template <typename T>
  void DecodeAttention(int32_t layer, const float* q, const AttentionShape& shape,
                       const AttentionMetadata& meta, const std::vector<int32_t>& decode_seqs,
                       float* out);
  template <typename T>
  void PrefillAttention(int32_t layer, const float* q, const AttentionShape& shape,
                        const AttentionMetadata& meta, const std::vector<int32_t>& prefill_seqs,
                        float* out);
  template <typename T>
  KeyBlocksT<T> PagedKeys(int32_t layer, const AttentionSeq& seq, int32_t kv_head) const;
  template <typename T>
  KvRowsT<T> PagedValues(int32_t layer, const AttentionSeq& seq, int32_t kv_head) const;
  template <typename T>
  void KvAppendT(int32_t layer, const float* k, const float* v, const AttentionMetadata& meta);
  // Elements (bytes for int8) of one KV head's part of a cache block: its
  // block_size · head_dim values and, in the int8 cache, their f32 scales.
  int64_t KvHeadElements() const {
    return int64_t{kv_shape_.block_size} *
           static_cast<int64_t>(kv_shape_.BytesPerTokenHead() / DTypeSize(kv_shape_.dtype));
  }

  // The bf16 path of Linear and LinearMany: every weight AMX-packed, with
  // the same number of inputs.
  void LinearBf16(const float* x, int32_t n, std::span<const LinearOutput> outputs);
  // The quantized path: every weight kQuantTiles, with the same number of
  // inputs; the activations are quantized once for all of them.
  void LinearQuant(const float* x, int32_t n, std::span<const LinearOutput> outputs);
  const float* RopeTable(const RopeSpec& spec, int32_t max_pos);

  ThreadPool pool_;
  LinearKernel linear_;
  bool use_bf16_ = false;
  Bf16LinearKernel bf16_linear_ = nullptr;
  std::vector<uint16_t> x_bf16_;  // activations rounded to bf16, [n, k_pad]
  QuantLinearKernel quant_linear_;
  QuantizeActivationsFn quantize_rows_;
  QuantizedRows x_q8_;            // activations quantized for kQuantTiles weights
  // One table of angles per distinct rotation (gemma3 alternates two):
  // [positions][rot_dim / 2][cos, sin].
  struct RopeTableEntry {
    int32_t rot_dim = 0;
    float base = 0.0f, freq_scale = 0.0f;
    const float* freq_factors = nullptr;
    float mscale = 1.0f;
    std::vector<float> table;
  };
  std::vector<RopeTableEntry> rope_tables_;
  std::vector<std::unique_ptr<Buffer>> packed_weights_;  // storage of packed weights
  KvStorageShape kv_shape_;
  // Per layer: K as [num_blocks, kv_heads, head_dim, block_size] (keys
  // transposed within a block) and V as [num_blocks, kv_heads, block_size,
  // head_dim] (see attention_kernels.h), in the cache's element type.
  std::vector<std::unique_ptr<Buffer>> k_cache_;
  std::vector<std::unique_ptr<Buffer>> v_cache_;
  // Faults the caches' pages in ahead of use; declared after them, so it
  // stops before they are freed.
  PagePopulator kv_populator_;
};

}  // namespace tessera::cpu
