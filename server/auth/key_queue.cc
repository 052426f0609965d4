#include "server/auth/key_queue.h"

#include <atomic>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::server::auth {

struct KeyQueue::Counts {
  explicit Counts(int32_t l) : limit(l) {}
  const int32_t limit;
  std::mutex mu;
  std::unordered_map<std::string, int32_t> by_key;  // guarded by mu; no zero entries
};

struct KeyQueue::Ticket::Hold {
  std::shared_ptr<Counts> counts;
  std::string key;
  std::atomic<bool> released{false};
};

KeyQueue::Ticket::Ticket() = default;
KeyQueue::Ticket::Ticket(Ticket&& other) noexcept = default;
KeyQueue::Ticket::~Ticket() { Release(); }

KeyQueue::Ticket& KeyQueue::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    hold_ = std::move(other.hold_);
  }
  return *this;
}

void KeyQueue::Ticket::Release() {
  if (hold_ == nullptr || hold_->released.exchange(true)) return;
  Counts& counts = *hold_->counts;
  std::lock_guard<std::mutex> lock(counts.mu);
  auto it = counts.by_key.find(hold_->key);
  if (it != counts.by_key.end() && --it->second <= 0) counts.by_key.erase(it);
}

KeyQueue::KeyQueue(int32_t limit) : counts_(std::make_shared<Counts>(limit < 1 ? 1 : limit)) {}

absl::StatusOr<KeyQueue::Ticket> KeyQueue::Enter(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(counts_->mu);
    int32_t& queued = counts_->by_key[key];
    if (queued >= counts_->limit) {
      if (queued == 0) counts_->by_key.erase(key);
      return absl::ResourceExhaustedError(
          absl::StrCat("the API key '", key, "' has ", counts_->limit,
                       " requests queued (--max-queued-requests-per-key); retry later"));
    }
    ++queued;
  }
  Ticket ticket;
  ticket.hold_ = std::make_unique<Ticket::Hold>();
  ticket.hold_->counts = counts_;
  ticket.hold_->key = key;
  return ticket;
}

int32_t KeyQueue::queued(const std::string& key) const {
  std::lock_guard<std::mutex> lock(counts_->mu);
  auto it = counts_->by_key.find(key);
  return it == counts_->by_key.end() ? 0 : it->second;
}

int32_t KeyQueue::limit() const { return counts_->limit; }

}  // namespace tessera::server::auth
