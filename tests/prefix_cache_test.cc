// The block allocator's prefix cache: hits, misses, hash collisions,
// eviction order and reference counts.
#include <numeric>
#include <vector>

#include "engine/kv_cache/block_allocator.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

constexpr int32_t kBlock = 4;

std::vector<int32_t> Tokens(int32_t first, int32_t count) {
  std::vector<int32_t> t(count);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A table holding `tokens`, computed and registered as the scheduler does.
BlockTable Computed(BlockAllocator& alloc, const std::vector<int32_t>& tokens,
                    uint64_t extra = 0) {
  BlockTable t = alloc.NewTable();
  EXPECT_TRUE(t.EnsureCapacity(static_cast<int32_t>(tokens.size())).ok());
  t.CacheFullBlocks(tokens, static_cast<int32_t>(tokens.size()), extra);
  return t;
}

TEST(PrefixCache, FinishedSequenceBlocksAreFoundAgain) {
  BlockAllocator alloc(16, kBlock);
  const std::vector<int32_t> prompt = Tokens(1, 10);  // 2 full blocks + 2 tokens
  std::vector<int32_t> first_blocks;
  {
    BlockTable t = Computed(alloc, prompt);
    first_blocks = t.blocks();
    EXPECT_EQ(alloc.num_cached(), 2);
  }
  EXPECT_EQ(alloc.num_used(), 0);    // released ...
  EXPECT_EQ(alloc.num_cached(), 2);  // ... but still cached
  EXPECT_EQ(alloc.num_free(), 16);   // and free for allocation
  PrefixMatch m = alloc.MatchPrefix(prompt, 9, 0);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(m.num_evictable, 2);
  ASSERT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.blocks[0], first_blocks[0]);
  EXPECT_EQ(m.blocks[1], first_blocks[1]);
  BlockTable again = alloc.NewTable();
  EXPECT_EQ(again.AdoptPrefix(m), 8);
  EXPECT_EQ(alloc.ref_count(m.blocks[0]), 1);
  EXPECT_EQ(alloc.num_free(), 14);
}

TEST(PrefixCache, MatchStopsAtMaxTokensAndAtTheFirstDifference) {
  BlockAllocator alloc(16, kBlock);
  BlockTable held = Computed(alloc, Tokens(1, 12));
  // max_tokens 8 (a prompt of 9 keeps its last token): 2 blocks, not 3.
  EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 12), 8, 0).num_tokens, 8);
  EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 12), 7, 0).num_tokens, 4);
  std::vector<int32_t> other = Tokens(1, 12);
  other[5] = 99;  // second block differs
  EXPECT_EQ(alloc.MatchPrefix(other, 12, 0).num_tokens, 4);
  other[0] = 99;  // first block differs: nothing after it can match
  EXPECT_EQ(alloc.MatchPrefix(other, 12, 0).num_tokens, 0);
  EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 12), 12, /*extra=*/7).num_tokens, 0);
  EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 3), 3, 0).num_tokens, 0);  // no full block
}

TEST(PrefixCache, DisabledCacheNeverMatches) {
  PrefixCacheOptions off;
  off.enabled = false;
  BlockAllocator alloc(8, kBlock, off);
  { BlockTable t = Computed(alloc, Tokens(1, 8)); }
  EXPECT_EQ(alloc.num_cached(), 0);
  EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 8), 8, 0).num_tokens, 0);
}

// Every block hashes the same: each lookup finds a block under its hash and
// must reject it unless tokens and parent are really the same.
TEST(PrefixCache, CollidingHashesNeverServeOtherTokens) {
  PrefixCacheOptions colliding;
  colliding.hash = [](uint64_t, std::span<const int32_t>, uint64_t) { return uint64_t{42}; };
  BlockAllocator alloc(16, kBlock, colliding);
  BlockTable a = Computed(alloc, Tokens(1, 8));
  EXPECT_EQ(alloc.num_cached(), 1);  // block 2 collides with block 1 of the same table
  EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 8), 8, 0).num_tokens, 4);
  EXPECT_EQ(alloc.MatchPrefix(Tokens(50, 8), 8, 0).num_tokens, 0);
  // A second block whose tokens and hash equal the cached first block's but
  // whose parent differs (the cached one has none).
  std::vector<int32_t> twice = Tokens(1, 4);
  twice.insert(twice.end(), twice.begin(), twice.end());
  EXPECT_EQ(alloc.MatchPrefix(twice, 8, 0).num_tokens, 4);
  BlockTable b = Computed(alloc, Tokens(50, 8));  // collides: not registered
  EXPECT_EQ(alloc.num_cached(), 1);
  EXPECT_NE(b.blocks()[0], a.blocks()[0]);
}

// A released sequence's tail is evicted before its head, so that what stays
// cached is still a usable prefix.
TEST(PrefixCache, TailBlocksAreEvictedBeforeHeads) {
  BlockAllocator alloc(3, kBlock);
  { BlockTable t = Computed(alloc, Tokens(1, 8)); }
  ASSERT_EQ(alloc.num_cached(), 2);
  // One never-used block, then one eviction: the tail.
  BlockTable t = alloc.NewTable();
  ASSERT_TRUE(t.EnsureCapacity(8).ok());
  EXPECT_EQ(alloc.num_cached(), 1);
  EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 8), 8, 0).num_tokens, 4);
}

TEST(PrefixCache, EvictsLeastRecentlyReleasedFirstAndOnlyWhenNeeded) {
  BlockAllocator alloc(6, kBlock);
  { BlockTable t = Computed(alloc, Tokens(1, 8)); }    // A: released first
  { BlockTable t = Computed(alloc, Tokens(100, 8)); }  // B
  EXPECT_EQ(alloc.num_cached(), 4);
  {
    BlockTable t = alloc.NewTable();
    ASSERT_TRUE(t.EnsureCapacity(8).ok());  // 2 never-used blocks: no eviction
    EXPECT_EQ(alloc.num_cached(), 4);
    BlockTable u = alloc.NewTable();
    ASSERT_TRUE(u.EnsureCapacity(4).ok());  // evicts A's tail block
    EXPECT_EQ(alloc.num_cached(), 3);
    EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 8), 8, 0).num_tokens, 4);
    EXPECT_EQ(alloc.MatchPrefix(Tokens(100, 8), 8, 0).num_tokens, 8);
    BlockTable v = alloc.NewTable();
    ASSERT_TRUE(v.EnsureCapacity(4).ok());  // then A's head
    EXPECT_EQ(alloc.MatchPrefix(Tokens(1, 8), 8, 0).num_tokens, 0);
    EXPECT_EQ(alloc.MatchPrefix(Tokens(100, 8), 8, 0).num_tokens, 8);
  }
  // A hit refreshes: B used again then released is now the newest.
  { BlockTable t = Computed(alloc, Tokens(200, 8)); }  // C
  {
    BlockTable b = alloc.NewTable();
    b.AdoptPrefix(alloc.MatchPrefix(Tokens(100, 8), 8, 0));
  }
  BlockTable big = alloc.NewTable();
  ASSERT_TRUE(big.EnsureCapacity(8).ok());  // 2 plain free blocks
  BlockTable more = alloc.NewTable();
  ASSERT_TRUE(more.EnsureCapacity(8).ok());  // evicts C (older than B's reuse)
  EXPECT_EQ(alloc.MatchPrefix(Tokens(200, 8), 8, 0).num_tokens, 0);
  EXPECT_EQ(alloc.MatchPrefix(Tokens(100, 8), 8, 0).num_tokens, 8);
}

TEST(PrefixCache, SharedBlocksAreCountedAndNeverEvictedWhileReferenced) {
  BlockAllocator alloc(4, kBlock);
  BlockTable a = Computed(alloc, Tokens(1, 8));
  BlockTable b = alloc.NewTable();
  EXPECT_EQ(b.AdoptPrefix(alloc.MatchPrefix(Tokens(1, 9), 8, 0)), 8);
  EXPECT_EQ(alloc.ref_count(a.blocks()[0]), 2);
  EXPECT_EQ(alloc.num_used(), 2);
  BlockTable c = alloc.NewTable();
  EXPECT_EQ(c.EnsureCapacity(12).code(), absl::StatusCode::kResourceExhausted);
  a.Reset();
  EXPECT_EQ(alloc.ref_count(b.blocks()[0]), 1);
  EXPECT_EQ(alloc.num_used(), 2);
  EXPECT_EQ(c.EnsureCapacity(12).code(), absl::StatusCode::kResourceExhausted);
  b.Reset();
  EXPECT_EQ(alloc.num_used(), 0);
  ASSERT_TRUE(c.EnsureCapacity(16).ok());  // now the cached blocks are evicted
  EXPECT_EQ(alloc.num_cached(), 0);
}

// Two sequences computing the same prompt at once: the second's blocks are
// swapped for the registered ones, so the chain continues past them.
TEST(PrefixCache, DuplicateComputationSharesTheRegisteredBlocks) {
  BlockAllocator alloc(16, kBlock);
  BlockTable a = alloc.NewTable(), b = alloc.NewTable();
  const std::vector<int32_t> prompt = Tokens(1, 8);
  ASSERT_TRUE(a.EnsureCapacity(8).ok());
  ASSERT_TRUE(b.EnsureCapacity(8).ok());
  EXPECT_EQ(alloc.num_used(), 4);
  a.CacheFullBlocks(prompt, 8, 0);
  b.CacheFullBlocks(prompt, 8, 0);
  EXPECT_EQ(b.blocks(), a.blocks());
  EXPECT_EQ(alloc.num_used(), 2);
  EXPECT_EQ(alloc.ref_count(a.blocks()[1]), 2);
  std::vector<int32_t> longer = Tokens(1, 12);
  ASSERT_TRUE(b.EnsureCapacity(12).ok());
  b.CacheFullBlocks(longer, 12, 0);
  EXPECT_EQ(alloc.MatchPrefix(longer, 12, 0).num_tokens, 12);
}

TEST(PrefixCache, OnlyComputedFullBlocksAreRegistered) {
  BlockAllocator alloc(16, kBlock);
  BlockTable t = alloc.NewTable();
  ASSERT_TRUE(t.EnsureCapacity(12).ok());
  const std::vector<int32_t> tokens = Tokens(1, 12);
  t.CacheFullBlocks(tokens, 7, 0);  // one full block computed
  EXPECT_EQ(alloc.num_cached(), 1);
  t.CacheFullBlocks(tokens, 11, 0);
  EXPECT_EQ(alloc.num_cached(), 2);
  t.CacheFullBlocks(tokens, 12, 0);
  EXPECT_EQ(alloc.num_cached(), 3);
}

TEST(PrefixCache, DefaultHashDependsOnEveryInput) {
  const std::vector<int32_t> t = Tokens(1, 4);
  std::vector<int32_t> u = t;
  u[3] = 5;
  const uint64_t h = DefaultBlockHash(0, t, 0);
  EXPECT_NE(h, DefaultBlockHash(1, t, 0));
  EXPECT_NE(h, DefaultBlockHash(0, t, 1));
  EXPECT_NE(h, DefaultBlockHash(0, u, 0));
  EXPECT_EQ(h, DefaultBlockHash(0, Tokens(1, 4), 0));
}

}  // namespace
}  // namespace tessera
