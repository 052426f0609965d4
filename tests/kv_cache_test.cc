// The block allocator and per-sequence block tables.
#include "engine/kv_cache/block_allocator.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(BlockAllocator, GrowsTablesAndReportsUsage) {
  BlockAllocator alloc(8, 16);
  BlockTable t = alloc.NewTable();
  ASSERT_TRUE(t.EnsureCapacity(1).ok());
  EXPECT_EQ(t.blocks().size(), 1u);
  ASSERT_TRUE(t.EnsureCapacity(16).ok());
  EXPECT_EQ(t.blocks().size(), 1u);
  ASSERT_TRUE(t.EnsureCapacity(17).ok());
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(t.capacity_tokens(), 32);
  EXPECT_EQ(alloc.num_used(), 2);
  EXPECT_DOUBLE_EQ(alloc.usage_ratio(), 0.25);
  EXPECT_EQ(t.Slot(17), t.blocks()[1] * 16 + 1);
}

TEST(BlockAllocator, ExhaustionLeavesTableUnchanged) {
  BlockAllocator alloc(3, 4);
  BlockTable a = alloc.NewTable();
  ASSERT_TRUE(a.EnsureCapacity(8).ok());
  BlockTable b = alloc.NewTable();
  auto s = b.EnsureCapacity(8);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(b.blocks().empty());
  EXPECT_EQ(alloc.num_free(), 1);
}

TEST(BlockAllocator, DestructionAndMoveReturnBlocks) {
  BlockAllocator alloc(4, 4);
  {
    BlockTable a = alloc.NewTable();
    ASSERT_TRUE(a.EnsureCapacity(16).ok());
    EXPECT_EQ(alloc.num_free(), 0);
    BlockTable moved = std::move(a);
    EXPECT_TRUE(a.blocks().empty());
    EXPECT_EQ(moved.blocks().size(), 4u);
    EXPECT_EQ(alloc.num_free(), 0);
  }
  EXPECT_EQ(alloc.num_free(), 4);
  BlockTable c = alloc.NewTable();
  ASSERT_TRUE(c.EnsureCapacity(5).ok());
  c.Reset();
  EXPECT_EQ(alloc.num_free(), 4);
}

TEST(BlockAllocator, BlocksAreDistinctAcrossTables) {
  BlockAllocator alloc(10, 2);
  BlockTable a = alloc.NewTable(), b = alloc.NewTable();
  ASSERT_TRUE(a.EnsureCapacity(10).ok());
  ASSERT_TRUE(b.EnsureCapacity(10).ok());
  std::vector<int32_t> all = a.blocks();
  all.insert(all.end(), b.blocks().begin(), b.blocks().end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
  EXPECT_EQ(all.size(), 10u);
}

}  // namespace
}  // namespace tessera
