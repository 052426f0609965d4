// Workload shapes on top of random prompts: a prefix shared by every request
// (a system prompt), multi-turn conversations that resend their history,
// and a mix of request priorities.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace tessera::bench {

// Whether request `index` is one of the --priority-mix fraction `mix` of
// high-priority requests: the same answer for the same (seed, index).
bool IsHighPriority(uint64_t seed, int64_t index, double mix);

// The shared prefix of `length` ids (the same for every request of a seed).
std::vector<int32_t> SharedPrefixIds(uint64_t seed, int length, int32_t vocab_size);

struct WorkloadShape {
  uint64_t seed = 0;
  int32_t vocab_size = 0;
  int shared_prefix_len = 0;
  int question_len = 128;  // ids of each request's own part (each turn's question)
  int turns = 1;           // turns per conversation
};

// Hands out the prompt of each request. With one turn, request i's prompt is
// the shared prefix followed by its own random ids. With K turns a request
// continues a conversation whose previous turn has finished (or starts a
// new one): its prompt is that conversation's history, prefix, questions
// and the answers received, followed by a new question. Thread-safe.
class Conversations {
 public:
  explicit Conversations(const WorkloadShape& shape);

  // The prompt of request `index`.
  std::vector<int32_t> Next(int64_t index);
  // Request `index` ended; `answer` is what it generated (failed: the
  // conversation ends).
  void Done(int64_t index, bool ok, const std::vector<int32_t>& answer);

  // Longest prompt a request can get plus its answer, in tokens.
  int64_t MaxTokens(int max_answer_tokens) const;

 private:
  struct Conversation {
    std::vector<int32_t> history;
    int turn = 0;
  };

  WorkloadShape shape_;
  std::vector<int32_t> prefix_;
  std::mutex mu_;
  int64_t next_conversation_ = 0;                  // guarded by mu_
  std::map<int64_t, Conversation> conversations_;  // guarded by mu_
  std::deque<int64_t> ready_;                      // guarded by mu_
  std::map<int64_t, int64_t> pending_;             // request index -> conversation
};

}  // namespace tessera::bench
