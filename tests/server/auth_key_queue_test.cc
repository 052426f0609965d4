// The per-key queue cap: tickets per key up to the limit, released once
// whichever way a request leaves the queue.
#include "server/auth/key_queue.h"

#include <optional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::server::auth {
namespace {

TEST(KeyQueueTest, CapsEachKeyOnItsOwn) {
  KeyQueue queue(2);
  absl::StatusOr<KeyQueue::Ticket> a1 = queue.Enter("alice");
  absl::StatusOr<KeyQueue::Ticket> a2 = queue.Enter("alice");
  ASSERT_TRUE(a1.ok() && a2.ok());
  absl::StatusOr<KeyQueue::Ticket> a3 = queue.Enter("alice");
  ASSERT_FALSE(a3.ok());
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("'alice'"), absl::string_view::npos);
  EXPECT_EQ(queue.queued("alice"), 2);
  // Another key has its own room.
  absl::StatusOr<KeyQueue::Ticket> b1 = queue.Enter("bob");
  ASSERT_TRUE(b1.ok());
  EXPECT_EQ(queue.queued("bob"), 1);
  // A release makes room again, once however often it is called.
  a1->Release();
  a1->Release();
  EXPECT_EQ(queue.queued("alice"), 1);
  EXPECT_TRUE(queue.Enter("alice").ok());  // taken and dropped at once
  EXPECT_EQ(queue.queued("alice"), 1);
}

TEST(KeyQueueTest, DestructionAndMovesReleaseOnce) {
  KeyQueue queue(1);
  {
    absl::StatusOr<KeyQueue::Ticket> t = queue.Enter("k");
    ASSERT_TRUE(t.ok());
    KeyQueue::Ticket moved = std::move(*t);
    EXPECT_EQ(queue.queued("k"), 1);
    KeyQueue::Ticket assigned;
    assigned = std::move(moved);
    EXPECT_EQ(queue.queued("k"), 1);
  }
  EXPECT_EQ(queue.queued("k"), 0);
  // Assigning over a held ticket releases the old one.
  absl::StatusOr<KeyQueue::Ticket> first = queue.Enter("k");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<KeyQueue::Ticket> other = queue.Enter("j");
  ASSERT_TRUE(other.ok());
  *first = std::move(*other);
  EXPECT_EQ(queue.queued("k"), 0);
  EXPECT_EQ(queue.queued("j"), 1);
}

TEST(KeyQueueTest, TicketsMayOutliveTheQueue) {
  std::optional<KeyQueue::Ticket> ticket;
  {
    KeyQueue queue(1);
    absl::StatusOr<KeyQueue::Ticket> t = queue.Enter("k");
    ASSERT_TRUE(t.ok());
    ticket = std::move(*t);
  }
  ticket->Release();  // must not touch freed memory (ASan builds check)
  ticket.reset();
}

TEST(KeyQueueTest, DefaultTicketIsEmpty) {
  KeyQueue::Ticket ticket;
  ticket.Release();
  KeyQueue queue(0);  // taken as 1
  EXPECT_EQ(queue.limit(), 1);
}

}  // namespace
}  // namespace tessera::server::auth
