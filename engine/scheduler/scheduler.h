// Iteration-level (continuous) batching. Each engine step:
//   Schedule()    picks the sequences to run and how many tokens each
//                 computes (decode: 1; prefill: the prompt, in chunks),
//                 under the token and sequence budgets, allocating KV blocks
//                 and preempting the newest sequence when blocks run out;
//   (the engine runs the model and samples one token per sampled row)
//   Postprocess() appends the sampled tokens, detokenizes, checks stop
//                 conditions, reports to sinks and frees finished sequences.
// The scheduler is the only code that changes a sequence's state.
#pragma once

#include <deque>
#include <list>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/kv_cache/block_allocator.h"
#include "engine/scheduler/sequence.h"

namespace tessera {

struct SchedulerOptions {
  int32_t max_num_seqs = 64;
  int32_t max_batched_tokens = 2048;
  int32_t context_length = 2048;
};

struct ScheduledSequence {
  Sequence* seq = nullptr;
  int32_t num_new_tokens = 0;  // tokens computed this step, from seq->num_computed
  bool sample = false;         // this step reaches the end of the sequence's tokens
};

struct StepPlan {
  std::vector<ScheduledSequence> seqs;
  int32_t num_tokens = 0;
  int32_t num_prefill_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, const Tokenizer& tokenizer,
            BlockAllocator& allocator);
  ~Scheduler();

  void Add(GenerationRequest request, std::shared_ptr<GenerationSink> sink);
  // Marks a request for cancellation; it finishes at the next Schedule().
  void Cancel(uint64_t request_id);
  // Finishes every sequence as kCancelled (shutdown).
  void CancelAll();

  StepPlan Schedule();
  // `sampled[i]` belongs to the i-th sampled entry of `plan.seqs`.
  void Postprocess(const StepPlan& plan, const std::vector<SampledToken>& sampled);
  // Finishes every sequence of the plan with kError (the step failed).
  void FailStep(const StepPlan& plan, const absl::Status& status);

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  uint64_t num_preemptions() const { return preemptions_; }

 private:
  using SeqPtr = std::unique_ptr<Sequence>;
  void FinishCancelledAndExpired();
  bool ScheduleRunning(StepPlan& plan);
  void AdmitWaiting(StepPlan& plan);
  bool TryAdmit(size_t index, StepPlan& plan);
  void Preempt(Sequence* seq);
  void AppendToken(Sequence& seq, const SampledToken& token);
  void Finish(Sequence& seq, FinishReason reason, absl::Status status = absl::OkStatus());
  void RemoveFinished();

  // Waiting sequences considered for each step's length grouping.
  static constexpr size_t kAdmissionWindow = 64;

  SchedulerOptions options_;
  const Tokenizer& tokenizer_;
  BlockAllocator& allocator_;
  std::deque<SeqPtr> waiting_;  // FIFO; preempted sequences go to the front
  std::list<SeqPtr> running_;   // in admission order; the back is preempted first
  uint64_t preemptions_ = 0;
};

}  // namespace tessera
