#include "engine/backend/cuda/attention_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/math.h"

namespace tessera::cuda {
namespace {

size_t Align(size_t bytes) { return (bytes + 255) / 256 * 256; }

int32_t PadKeys(int32_t keys) { return (keys + kKeyPad - 1) / kKeyPad * kKeyPad; }

// Cuts each prefill sequence into items and records every block table.
void CollectItems(const AttentionMetadata& meta, int32_t max_rows, AttentionPlan& plan) {
  for (const AttentionSeq& seq : meta.seqs) {
    const int32_t blocks = (seq.kv_len + meta.block_size - 1) / meta.block_size;
    const int32_t offset = static_cast<int32_t>(plan.block_tables.size());
    plan.block_tables.insert(plan.block_tables.end(), seq.block_table, seq.block_table + blocks);
    if (seq.q_len == 1) {
      plan.decode.push_back({seq.q_start, seq.kv_len, offset, 0});
      plan.max_decode_splits = std::max(plan.max_decode_splits, NumDecodeSplits(seq.kv_len));
      continue;
    }
    for (int32_t t0 = 0; t0 < seq.q_len; t0 += max_rows) {
      const int32_t rows = std::min(max_rows, seq.q_len - t0);
      plan.prefill.push_back({seq.q_start + t0, rows, seq.kv_len - seq.q_len + t0, offset});
    }
  }
}

}  // namespace

ChunkLayout LayoutChunk(int32_t count, int32_t tq, int32_t tk, const AttentionShape& shape,
                        size_t kv_elem_bytes) {
  const size_t c = static_cast<size_t>(count), h = shape.num_heads, hkv = shape.num_kv_heads;
  const size_t d = shape.head_dim, q = static_cast<size_t>(tq), k = static_cast<size_t>(tk);
  ChunkLayout l;
  size_t at = 0;
  l.q = at, at += Align(c * h * q * d * kv_elem_bytes);
  l.k = at, at += Align(c * hkv * k * d * kv_elem_bytes);
  l.v = at, at += Align(c * hkv * k * d * kv_elem_bytes);
  l.scores = at, at += Align(c * h * q * k * sizeof(float));
  l.probs = at, at += Align(c * h * q * k * kv_elem_bytes);
  l.out = at, at += Align(c * h * q * d * sizeof(float));
  l.total = at;
  return l;
}

size_t PrefillWorkspaceBytes(const AttentionShape& shape, size_t kv_elem_bytes,
                             int32_t max_item_rows, int32_t max_context) {
  return LayoutChunk(1, max_item_rows, PadKeys(max_context), shape, kv_elem_bytes).total;
}

absl::Status PlanAttention(const AttentionMetadata& meta, const PlanLimits& limits,
                           AttentionPlan& plan) {
  plan.decode.clear();
  plan.prefill.clear();
  plan.chunks.clear();
  plan.block_tables.clear();
  plan.max_decode_splits = 0;
  CollectItems(meta, std::max(1, limits.max_item_rows), plan);
  // Greedy: consecutive items share a chunk while its padded layout fits.
  PrefillChunk chunk;
  for (int32_t i = 0; i < static_cast<int32_t>(plan.prefill.size()); ++i) {
    const PrefillItem& item = plan.prefill[i];
    const int32_t tq = std::max(chunk.tq, item.rows);
    const int32_t tk = std::max(chunk.tk, PadKeys(item.KeysNeeded()));
    if (chunk.count > 0 &&
        LayoutChunk(chunk.count + 1, tq, tk, limits.shape, limits.kv_elem_bytes).total <=
            limits.workspace_bytes) {
      chunk.count += 1, chunk.tq = tq, chunk.tk = tk;
      continue;
    }
    if (chunk.count > 0) plan.chunks.push_back(chunk);
    chunk = {i, 1, item.rows, PadKeys(item.KeysNeeded())};
    if (LayoutChunk(1, chunk.tq, chunk.tk, limits.shape, limits.kv_elem_bytes).total >
        limits.workspace_bytes) {
      return absl::InternalError(absl::StrCat("prefill attention of ", item.rows, " rows over ",
                                              item.KeysNeeded(),
                                              " keys exceeds the reserved workspace"));
    }
  }
  if (chunk.count > 0) plan.chunks.push_back(chunk);
  return absl::OkStatus();
}

}  // namespace tessera::cuda
