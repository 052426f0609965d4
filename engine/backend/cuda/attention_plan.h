// How one step's attention is laid out on the GPU, planned on the host once
// per step (the same plan serves every layer) and uploaded in one copy.
// Pure C++: the CPU tests check the plan, and the CPU twins run it.
//
// The GPU KV cache, per layer, stores K and V each as
// [num_blocks, kv_heads, block_size, head_dim]: a token's head_dim values are
// contiguous, so a warp reads a key with one coalesced load.
//
// Decode rows (q_len 1) attend straight from the paged cache (DecodeItem).
// Prefill rows are cut into items of at most max_item_rows query rows,
// grouped into chunks; a chunk is laid out padded, like a batch:
// Q [count, kv_heads, group·tq, d], K and V [count, kv_heads, tk, d], scores
// and probabilities [count, kv_heads, group·tq, tk], output [.., group·tq, d],
// so that two strided-batched GEMMs (batch count·kv_heads) do the products.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/math.h"

namespace tessera::cuda {

// Bytes of one element of `dtype` (the module cannot use the engine
// library's DTypeSize: it links nothing of the server).
constexpr size_t DTypeSizeOf(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

// One layer's paged cache: K and V each [num_blocks, kv_heads, block_size,
// head_dim] of `dtype` (f32 or f16), in device memory (host memory for the
// CPU twins).
struct KvLayer {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF16;
  int32_t block_size = 16;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
};

struct DecodeItem {
  int32_t q_row = 0;         // packed token row of the query
  int32_t kv_len = 0;        // keys to attend to
  int32_t table_offset = 0;  // first entry of the sequence's block table in the step's tables
  int32_t unused = 0;
};

struct PrefillItem {
  int32_t q_row = 0;      // packed token row of the item's first query
  int32_t rows = 0;       // query rows in the item
  int32_t first_pos = 0;  // absolute position of the first query; row t sees first_pos + t + 1 keys
  int32_t table_offset = 0;
  TESSERA_HD int32_t KeysNeeded() const { return first_pos + rows; }
};

struct PrefillChunk {
  int32_t first_item = 0;
  int32_t count = 0;  // items in the chunk
  int32_t tq = 0;     // padded query rows per item (the chunk's most)
  int32_t tk = 0;     // padded keys per item, a multiple of kKeyPad
};

constexpr int32_t kKeyPad = 16;

// Bytes of device workspace a chunk needs, each array 256-byte aligned.
struct ChunkLayout {
  size_t q = 0, k = 0, v = 0, scores = 0, probs = 0, out = 0;  // byte offsets
  size_t total = 0;
};
ChunkLayout LayoutChunk(int32_t count, int32_t tq, int32_t tk, const AttentionShape& shape,
                        size_t kv_elem_bytes);

struct PlanLimits {
  AttentionShape shape;
  size_t kv_elem_bytes = 4;    // f32 or f16 KV (the compute type of the products)
  size_t workspace_bytes = 0;  // room for one chunk
  int32_t max_item_rows = 512;
};

struct AttentionPlan {
  std::vector<DecodeItem> decode;
  std::vector<PrefillItem> prefill;
  std::vector<PrefillChunk> chunks;
  std::vector<int32_t> block_tables;  // every sequence's table, concatenated
  int32_t max_decode_splits = 0;      // most splits of any decode item
};

// Fails when a single item cannot fit the workspace (limits too small for
// the step: the caller reserved for a smaller context).
absl::Status PlanAttention(const AttentionMetadata& meta, const PlanLimits& limits,
                           AttentionPlan& plan);

// The workspace that fits one item of max_item_rows rows over max_context keys.
size_t PrefillWorkspaceBytes(const AttentionShape& shape, size_t kv_elem_bytes,
                             int32_t max_item_rows, int32_t max_context);

}  // namespace tessera::cuda
