#include "client/bench/workload.h"

#include <random>

#include "client/bench/prompts.h"

namespace tessera::bench {

bool IsHighPriority(uint64_t seed, int64_t index, double mix) {
  if (mix <= 0.0) return false;
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 7u};
  std::mt19937 rng(seq);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < mix;
}

std::vector<int32_t> SharedPrefixIds(uint64_t seed, int length, int32_t vocab_size) {
  // Index -1 is never a request's: the prefix differs from every question.
  return RandomPromptIds(seed, -1, length, vocab_size);
}

Conversations::Conversations(const WorkloadShape& shape)
    : shape_(shape), prefix_(SharedPrefixIds(shape.seed, shape.shared_prefix_len, shape.vocab_size)) {}

std::vector<int32_t> Conversations::Next(int64_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t id;
  if (!ready_.empty()) {
    id = ready_.front();
    ready_.pop_front();
  } else {
    id = next_conversation_++;
    conversations_[id].history = prefix_;
  }
  Conversation& c = conversations_[id];
  // Questions are numbered by conversation and turn, so that they do not
  // depend on the order requests finish in.
  const std::vector<int32_t> question = RandomPromptIds(
      shape_.seed, id * shape_.turns + c.turn, shape_.question_len, shape_.vocab_size);
  c.history.insert(c.history.end(), question.begin(), question.end());
  pending_[index] = id;
  return c.history;
}

void Conversations::Done(int64_t index, bool ok, const std::vector<int32_t>& answer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto pending = pending_.find(index);
  if (pending == pending_.end()) return;
  const int64_t id = pending->second;
  pending_.erase(pending);
  Conversation& c = conversations_[id];
  c.history.insert(c.history.end(), answer.begin(), answer.end());
  if (ok && ++c.turn < shape_.turns) {
    ready_.push_back(id);
  } else {
    conversations_.erase(id);
  }
}

int64_t Conversations::MaxTokens(int max_answer_tokens) const {
  return shape_.shared_prefix_len +
         static_cast<int64_t>(shape_.turns) * (shape_.question_len + max_answer_tokens);
}

}  // namespace tessera::bench
