// CudaBackend's KV append and attention, and the once-per-step upload of
// the metadata they share across layers.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_backend.h"

namespace tessera::cuda {
namespace {

size_t Align(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The plan's arrays in one upload: tables, then decode items, then prefill items.
struct PlanOffsets {
  size_t tables = 0, decode = 0, prefill = 0, total = 0;
};

PlanOffsets OffsetsOf(const AttentionPlan& plan) {
  PlanOffsets o;
  o.decode = Align(plan.block_tables.size() * sizeof(int32_t));
  o.prefill = o.decode + Align(plan.decode.size() * sizeof(DecodeItem));
  o.total = o.prefill + Align(plan.prefill.size() * sizeof(PrefillItem));
  return o;
}

}  // namespace

KvLayer CudaBackend::LayerCache(int32_t layer) const {
  const size_t layer_bytes = size_t(kv_shape_.num_blocks) * kv_shape_.block_size *
                             kv_shape_.num_kv_heads * kv_shape_.head_dim *
                             DTypeSizeOf(kv_shape_.dtype);
  return KvLayer{k_cache_.as<char>() + layer * layer_bytes,
                 v_cache_.as<char>() + layer * layer_bytes,
                 kv_shape_.dtype,
                 kv_shape_.block_size,
                 kv_shape_.num_kv_heads,
                 kv_shape_.head_dim};
}

absl::Status CudaBackend::EnsureStaging(size_t slot_bytes, size_t plan_bytes) {
  if (slots_host_.size() < slot_bytes) {
    auto host = PinnedBuffer::Allocate(slot_bytes);
    if (!host.ok()) return host.status();
    if (auto s = CudaStatus(cudaEventSynchronize(slots_copied_.get()), "event"); !s.ok()) return s;
    slots_host_ = std::move(*host);
  }
  if (plan_host_.size() < plan_bytes) {
    auto host = PinnedBuffer::Allocate(plan_bytes);
    if (!host.ok()) return host.status();
    if (auto s = CudaStatus(cudaEventSynchronize(plan_copied_.get()), "event"); !s.ok()) return s;
    plan_host_ = std::move(*host);
  }
  if (auto s = EnsureSize(slots_dev_, slot_bytes); !s.ok()) return s;
  return EnsureSize(plan_dev_, plan_bytes);
}

absl::Status CudaBackend::UploadSlots(const AttentionMetadata& meta) {
  const size_t bytes = size_t(meta.num_tokens) * sizeof(int32_t);
  // Sized once for the reserved step; larger steps grow it.
  const size_t reserve = size_t(std::max(limits_.max_tokens, meta.num_tokens)) * sizeof(int32_t);
  if (auto s = EnsureStaging(reserve, 0); !s.ok()) return s;
  // The previous step's copy must have left the staging memory.
  if (auto s = CudaStatus(cudaEventSynchronize(slots_copied_.get()), "event"); !s.ok()) return s;
  std::memcpy(slots_host_.data(), meta.slot_mapping.data(), bytes);
  if (auto s = CudaStatus(cudaMemcpyAsync(slots_dev_.data(), slots_host_.data(), bytes,
                                          cudaMemcpyHostToDevice, stream()),
                          "uploading the slot mapping");
      !s.ok()) {
    return s;
  }
  return CudaStatus(cudaEventRecord(slots_copied_.get(), stream()), "cudaEventRecord");
}

absl::Status CudaBackend::UploadPlan(const AttentionMetadata& meta, const AttentionShape& shape) {
  const PlanLimits limits{shape, DTypeSizeOf(kv_shape_.dtype), prefill_workspace_.size(),
                          item_rows_};
  if (limits.workspace_bytes == 0)
    return absl::FailedPreconditionError("ReserveWorkspace was not called");
  if (auto s = PlanAttention(meta, limits, plan_); !s.ok()) return s;
  const PlanOffsets o = OffsetsOf(plan_);
  // Reserved for max_seqs sequences of max_context keys; larger plans grow it.
  const int32_t bs = std::max(1, kv_shape_.block_size);
  const size_t reserve =
      Align(size_t(limits_.max_seqs) * ((limits_.max_context + bs - 1) / bs) * 4) +
      Align(size_t(limits_.max_seqs) * sizeof(DecodeItem)) +
      Align(size_t(limits_.max_seqs + limits_.max_tokens) * sizeof(PrefillItem));
  if (auto s = EnsureStaging(0, std::max(reserve, o.total)); !s.ok()) return s;
  if (auto s = CudaStatus(cudaEventSynchronize(plan_copied_.get()), "event"); !s.ok()) return s;
  auto* host = static_cast<char*>(plan_host_.data());
  std::memcpy(host, plan_.block_tables.data(), plan_.block_tables.size() * sizeof(int32_t));
  std::memcpy(host + o.decode, plan_.decode.data(), plan_.decode.size() * sizeof(DecodeItem));
  std::memcpy(host + o.prefill, plan_.prefill.data(), plan_.prefill.size() * sizeof(PrefillItem));
  if (auto s = CudaStatus(
          cudaMemcpyAsync(plan_dev_.data(), host, o.total, cudaMemcpyHostToDevice, stream()),
          "uploading the attention plan");
      !s.ok()) {
    return s;
  }
  auto* dev = plan_dev_.as<char>();
  tables_dev_ = reinterpret_cast<const int32_t*>(dev);
  decode_dev_ = reinterpret_cast<const DecodeItem*>(dev + o.decode);
  prefill_dev_ = reinterpret_cast<const PrefillItem*>(dev + o.prefill);
  // Partials for the step's decode rows.
  const size_t partials = plan_.decode.size() * shape.num_heads *
                          size_t(std::max(plan_.max_decode_splits, 1)) * (shape.head_dim + 2) * 4;
  if (auto s = EnsureSize(decode_partials_, partials); !s.ok()) return s;
  return CudaStatus(cudaEventRecord(plan_copied_.get(), stream()), "cudaEventRecord");
}

void CudaBackend::KvAppend(int32_t layer, const float* k, const float* v,
                           const AttentionMetadata& meta) {
  if (!Begin()) return;
  if (layer < 0 || layer >= kv_shape_.num_layers) {
    Record(absl::InvalidArgumentError(absl::StrCat("KV append to layer ", layer)));
    return;
  }
  if (layer == 0) {  // a new step
    plan_stale_ = true;
    if (!Record(UploadSlots(meta))) return;
  }
  Record(
      LaunchKvAppend(k, v, slots_dev_.as<int32_t>(), meta.num_tokens, LayerCache(layer), stream()));
}

void CudaBackend::Attention(int32_t layer, const float* q, const AttentionShape& shape,
                            const AttentionMetadata& meta, float* out) {
  ForgetConversion();
  if (!Begin()) return;
  if (layer < 0 || layer >= kv_shape_.num_layers) {
    Record(absl::InvalidArgumentError(absl::StrCat("attention on layer ", layer)));
    return;
  }
  if (plan_stale_) {
    if (!Record(UploadPlan(meta, shape))) return;
    plan_stale_ = false;
  }
  const KvLayer cache = LayerCache(layer);
  if (!plan_.decode.empty() &&
      !Record(LaunchDecodeAttention(
          q, cache, shape, tables_dev_, decode_dev_, static_cast<int32_t>(plan_.decode.size()),
          plan_.max_decode_splits, decode_partials_.as<float>(), out, stream()))) {
    return;
  }
  for (const PrefillChunk& chunk : plan_.chunks) {
    if (!Record(PrefillAttentionChunk(cublas(), q, cache, shape, tables_dev_, prefill_dev_, chunk,
                                      prefill_workspace_.data(), out, stream()))) {
      return;
    }
  }
}

}  // namespace tessera::cuda
