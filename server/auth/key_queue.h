// The per-key cap on queued requests (--max-queued-requests-per-key), so
// that one tenant cannot fill the engine's queue and starve the others.
// A request holds a ticket from admission until it leaves the queue: its
// first token, or its end (finished, cancelled, failed, refused by the
// engine). A request preempted back to the queue is not counted again.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"

namespace tessera::server::auth {

class KeyQueue {
  struct Counts;

 public:
  // One queued request of one key. Release() (or destruction) ends it,
  // once; safe to call from any thread.
  class Ticket {
   public:
    Ticket();
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket();
    void Release();

   private:
    friend class KeyQueue;
    struct Hold;
    std::unique_ptr<Hold> hold_;
  };

  // `limit` >= 1 queued requests per key.
  explicit KeyQueue(int32_t limit);

  // A ticket for one more queued request of the key named `key`, or
  // RESOURCE_EXHAUSTED when it has `limit` already.
  absl::StatusOr<Ticket> Enter(const std::string& key);

  // Queued requests of `key` now.
  int32_t queued(const std::string& key) const;
  int32_t limit() const;

 private:
  std::shared_ptr<Counts> counts_;  // shared with tickets, which may outlive the queue
};

}  // namespace tessera::server::auth
