// The paged KV cache's bookkeeping: a fixed pool of blocks, each holding
// `block_size` tokens' K and V for every layer, handed out to sequences
// through move-only RAII allocations. Block ids index the backend's KV
// storage, which is shared across layers.
//
// Automatic prefix caching: a full block whose K/V have been computed can be
// registered under a chained hash of (parent block's hash, the block's token
// ids, an extra key for whatever else changes K/V, such as the model). A
// later sequence whose prompt starts with the same tokens shares those
// blocks instead of computing them again. Blocks are reference counted; a
// cached block nobody references stays cached until the pool needs it, and
// such blocks are evicted least recently released first. A hit compares the
// tokens, the extra key and the parent block, so a hash collision is a miss,
// never another sequence's K/V.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

class BlockAllocator;

// Hash of one full block given its parent's hash (0 for the first block),
// its token ids and the extra key. Replaceable for tests.
using BlockHashFn =
    std::function<uint64_t(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra)>;

// The default BlockHashFn: 64-bit FNV-1a over the parent, tokens and extra
// key, finished with a mixing step.
uint64_t DefaultBlockHash(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra);

struct PrefixCacheOptions {
  bool enabled = true;
  BlockHashFn hash = DefaultBlockHash;
};

// A run of cached blocks matching the start of a token sequence.
struct PrefixMatch {
  std::vector<int32_t> blocks;
  std::vector<uint64_t> hashes;  // chained hash of each block
  int32_t num_tokens = 0;        // blocks.size() × block_size
  int32_t num_evictable = 0;     // of those, blocks nobody references now
};

// The blocks of one sequence, in order: token t lives in block
// blocks()[t / block_size] at offset t % block_size. Releases its blocks to
// the allocator when destroyed or reset (cached ones stay cached).
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
  // Releases every block.
  void Reset();
  // Takes a reference on each block of `match` (from MatchPrefix); the
  // table must be empty. Returns the tokens now covered.
  int32_t AdoptPrefix(const PrefixMatch& match);
  // Registers in the prefix cache every block that is full within the first
  // `num_computed` tokens of `tokens` and not registered yet.
  void CacheFullBlocks(std::span<const int32_t> tokens, int32_t num_computed, uint64_t extra);

  const std::vector<int32_t>& blocks() const { return blocks_; }
  int32_t capacity_tokens() const;
  // The KV slot (block_id * block_size + offset) of token `t`.
  int32_t Slot(int32_t t) const;

 private:
  BlockAllocator* allocator_ = nullptr;
  std::vector<int32_t> blocks_;
  // Chained hashes of the leading blocks that are registered in the cache
  // (blocks_[i] is the cached block of hashes_[i]).
  std::vector<uint64_t> hashes_;
  bool caching_stopped_ = false;  // a hash collision: no more blocks of this table are cached
};

class BlockAllocator {
 public:
  BlockAllocator(int32_t num_blocks, int32_t block_size, PrefixCacheOptions prefix = {});

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_.enabled; }
  // Blocks an allocation may take: never used, or cached and unreferenced.
  int32_t num_free() const { return static_cast<int32_t>(free_.size() + evictable_.size()); }
  // Blocks referenced by at least one sequence.
  int32_t num_used() const { return num_blocks_ - num_free(); }
  // Blocks registered in the prefix cache (referenced or not).
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }
  double usage_ratio() const;
  // Blocks needed to hold `num_tokens` tokens.
  int32_t BlocksFor(int32_t num_tokens) const;

  BlockTable NewTable() { return BlockTable(this); }

  // The longest run of cached full blocks that starts `tokens`, covering at
  // most `max_tokens` tokens. Changes nothing.
  PrefixMatch MatchPrefix(std::span<const int32_t> tokens, int32_t max_tokens,
                          uint64_t extra) const;
  // Reference count of a block (tests).
  int32_t ref_count(int32_t block) const { return info_[block].ref; }

 private:
  friend class BlockTable;
  struct BlockInfo {
    int32_t ref = 0;
    bool cached = false;
    uint64_t hash = 0;
    uint64_t extra = 0;
    uint64_t uid = 0;         // unique per registration; never reused
    uint64_t parent_uid = 0;  // the parent block's uid when registered (0: first block)
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru;  // valid while cached with ref 0
  };

  absl::StatusOr<std::vector<int32_t>> Allocate(int32_t count);
  // Drops one reference to each block, last block first (so that a
  // sequence's tail is evicted before its head).
  void Release(const std::vector<int32_t>& blocks);
  void AddRef(int32_t block);
  // Registers `block` (full, computed) under the free `hash`.
  void Register(int32_t block, uint64_t hash, uint64_t parent_uid, std::span<const int32_t> tokens,
                uint64_t extra);
  // Whether cached `block` holds exactly these tokens after that parent.
  bool Matches(int32_t block, std::span<const int32_t> tokens, uint64_t extra,
               uint64_t parent_uid) const;
  void Evict(int32_t block);

  int32_t num_blocks_;
  int32_t block_size_;
  PrefixCacheOptions prefix_;
  std::vector<BlockInfo> info_;
  std::vector<int32_t> free_;      // a stack of uncached free blocks
  std::list<int32_t> evictable_;   // cached, unreferenced; front is evicted first
  std::unordered_map<uint64_t, int32_t> by_hash_;
  uint64_t next_uid_ = 1;
};

}  // namespace tessera
