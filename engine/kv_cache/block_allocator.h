// The paged KV cache's bookkeeping: a fixed pool of blocks, each holding
// `block_size` tokens' K and V for every layer, handed out to sequences
// through move-only RAII allocations. Block ids index the backend's KV
// storage, which is shared across layers.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

class BlockAllocator;

// The blocks of one sequence, in order: token t lives in block
// blocks()[t / block_size] at offset t % block_size. Returns its blocks to
// the allocator when destroyed or reset.
class BlockTable {
 public:
  BlockTable() = default;
  explicit BlockTable(BlockAllocator* allocator) : allocator_(allocator) {}
  ~BlockTable() { Reset(); }
  BlockTable(BlockTable&& other) noexcept;
  BlockTable& operator=(BlockTable&& other) noexcept;
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  // Grows the table to hold `num_tokens` tokens. On RESOURCE_EXHAUSTED the
  // table is unchanged.
  absl::Status EnsureCapacity(int32_t num_tokens);
  // Frees every block.
  void Reset();

  const std::vector<int32_t>& blocks() const { return blocks_; }
  int32_t capacity_tokens() const;
  // The KV slot (block_id * block_size + offset) of token `t`.
  int32_t Slot(int32_t t) const;

 private:
  BlockAllocator* allocator_ = nullptr;
  std::vector<int32_t> blocks_;
};

class BlockAllocator {
 public:
  BlockAllocator(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks_ - num_free(); }
  double usage_ratio() const;
  // Blocks needed to hold `num_tokens` tokens.
  int32_t BlocksFor(int32_t num_tokens) const;

  BlockTable NewTable() { return BlockTable(this); }

 private:
  friend class BlockTable;
  absl::StatusOr<std::vector<int32_t>> Allocate(int32_t count);
  void Free(const std::vector<int32_t>& blocks);

  int32_t num_blocks_;
  int32_t block_size_;
  std::vector<int32_t> free_;  // a stack: recently freed blocks are reused first
};

}  // namespace tessera
