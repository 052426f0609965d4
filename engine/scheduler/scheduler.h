// Iteration-level (continuous) batching. Each engine step:
//   Schedule()    picks the sequences to run and how many tokens each
//                 computes (decode: 1; prefill: the prompt, in chunks),
//                 under the token and sequence budgets, allocating KV blocks
//                 and preempting the newest (fcfs) or least urgent
//                 (priority) sequence when blocks run out; a newly admitted
//                 sequence starts after the longest run of its leading full
//                 blocks found in the prefix cache (never its last token,
//                 whose logits are needed);
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

// fcfs: waiting requests are admitted in arrival order (a window of them
// grouped by prompt length) and priorities are ignored. priority: lower
// GenerationRequest::priority is more urgent (as vLLM); waiting requests are
// admitted most urgent first, FIFO within a priority, and a more urgent
// waiting request preempts the least urgent running one when the batch or
// the KV cache is full.
enum class SchedulingPolicy { kFcfs, kPriority };

struct SchedulerOptions {
  int32_t max_num_seqs = 64;
  int32_t max_batched_tokens = 2048;
  int32_t context_length = 2048;
  // A waiting prompt whose whole prefill fits in the step joins it only while
  // the step prefills fewer than this many tokens; 0: no limit. Where a step
  // costs time in proportion to its tokens (a CPU), prompts prefilled
  // together all get their first token when the largest step ends, so a
  // burst of short prompts taken a few per step gets its first tokens
  // earlier, on average, at the same total work. A prompt too long for the
  // step (chunked) joins anyway: leaving its chunk out would shrink the step
  // without letting anyone finish sooner.
  int32_t prefill_group_tokens = 0;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // Priority policy: every this many seconds since its arrival a request
  // counts one priority level more urgent, so a request is served before any
  // request that arrives more than (its priority - the other's priority) ×
  // this many seconds after it. 0: strict priorities (starvation possible).
  double priority_aging_seconds = 10.0;
  // The prefix cache's extra key: whatever besides the tokens changes K/V
  // (the model file, the matmul type).
  uint64_t prefix_cache_key = 0;
  // Token ids a sequence may sample, [0, vocab_size); 0: the tokenizer's.
  int32_t vocab_size = 0;
};

struct ScheduledSequence {
  Sequence* seq = nullptr;
  int32_t num_new_tokens = 0;  // tokens computed this step, from seq->num_computed
  bool sample = false;         // this step reaches the end of the sequence's tokens
  bool prefill = false;        // counted in StepPlan::num_prefill_tokens
};

struct StepPlan {
  std::vector<ScheduledSequence> seqs;
  int32_t num_tokens = 0;
  int32_t num_prefill_tokens = 0;
  // Prefix cache lookups of the sequences admitted this step, in tokens (as
  // vLLM counts them): tokens looked up, and of those found cached.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
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

  // Whether `a` goes before `b` under the priority policy (aging included).
  bool MoreUrgent(const Sequence& a, const Sequence& b) const;

 private:
  using SeqPtr = std::unique_ptr<Sequence>;
  // kGroupFull: the step already prefills prefill_group_tokens (a prompt
  // that would not finish in it may still join).
  enum class AdmitResult { kAdmitted, kNoTokenBudget, kBatchFull, kNoBlocks, kGroupFull };
  void FinishCancelledAndExpired();
  // fcfs: every running sequence, then waiting ones in arrival order.
  bool ScheduleRunning(StepPlan& plan);
  void AdmitWaiting(StepPlan& plan);
  // priority (priority.cc): decodes, then prefill work most urgent first.
  void ScheduleByPriority(StepPlan& plan);
  enum class DecodeResult { kPlaced, kNoBudget, kNoBlocks, kPreempted };
  const Sequence* MostUrgentPrefill() const;
  int32_t SameClassDecodeRoom(const Sequence& urgent) const;
  DecodeResult PlaceDecode(Sequence* seq, StepPlan& plan, bool may_preempt);
  bool ScheduleDecodes(StepPlan& plan, const Sequence* urgent,
                       std::vector<Sequence*>& deferred);
  void PrefillByPriority(StepPlan& plan);
  bool PlacePrefillChunk(Sequence* seq, StepPlan& plan, std::vector<SeqPtr>& preempted);
  AdmitResult AdmitUrgent(Sequence* seq, StepPlan& plan, std::vector<SeqPtr>& preempted);
  // The least urgent running sequence if `seq` is more urgent than it, else
  // null.
  Sequence* VictimFor(const Sequence& seq) const;
  AdmitResult TryAdmit(size_t index, StepPlan& plan);
  // Drops the sequence's KV (cached blocks stay cached) and returns it,
  // removed from the running list, for the caller to queue.
  SeqPtr Preempt(Sequence* seq);
  // Preempts a sequence already placed in `plan` (taking it out of the plan).
  SeqPtr PreemptPlanned(Sequence* seq, StepPlan& plan);
  void AppendToken(Sequence& seq, const SampledToken& token);
  void Finish(Sequence& seq, FinishReason reason, absl::Status status = absl::OkStatus());
  void RemoveFinished();

  // Waiting sequences considered for each step's length grouping.
  static constexpr size_t kAdmissionWindow = 64;

  SchedulerOptions options_;
  const Tokenizer& tokenizer_;
  BlockAllocator& allocator_;
  std::deque<SeqPtr> waiting_;  // FIFO; preempted sequences go to the front
  // fcfs: in admission order; priority: sorted most urgent first at every
  // step. The back is preempted first.
  std::list<SeqPtr> running_;
  uint64_t preemptions_ = 0;
};

}  // namespace tessera
