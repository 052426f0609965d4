#include "engine/scheduler/scheduler.h"

#include <algorithm>

namespace tessera {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Sequence::Sequence(GenerationRequest req, std::shared_ptr<GenerationSink> s,
                   const Tokenizer& tokenizer, BlockTable table, int32_t vocab_size)
    : request(std::move(req)),
      sink(std::move(s)),
      tokens(request.prompt_ids),
      num_prompt(static_cast<int32_t>(request.prompt_ids.size())),
      blocks(std::move(table)),
      sampler(request.sampling, request.prompt_ids, vocab_size),
      detokenizer(tokenizer, /*strip_leading_space=*/false),
      stop_matcher(request.stopping.stop_strings, request.stopping.include_stop_string) {}

Scheduler::Scheduler(const SchedulerOptions& options, const Tokenizer& tokenizer,
                     BlockAllocator& allocator)
    : options_(options), tokenizer_(tokenizer), allocator_(allocator) {}

Scheduler::~Scheduler() { CancelAll(); }

void Scheduler::Add(GenerationRequest request, std::shared_ptr<GenerationSink> sink) {
  const int32_t vocab = options_.vocab_size > 0 ? options_.vocab_size : tokenizer_.vocab_size();
  waiting_.push_back(std::make_unique<Sequence>(std::move(request), std::move(sink), tokenizer_,
                                                allocator_.NewTable(), vocab));
}

void Scheduler::Cancel(uint64_t request_id) {
  auto mark = [&](auto& container) {
    for (auto& seq : container) {
      if (seq->request.id == request_id) seq->cancel_requested = true;
    }
  };
  mark(waiting_);
  mark(running_);
}

void Scheduler::CancelAll() {
  for (auto& seq : waiting_) Finish(*seq, FinishReason::kCancelled);
  for (auto& seq : running_) Finish(*seq, FinishReason::kCancelled);
  RemoveFinished();
}

void Scheduler::FinishCancelledAndExpired() {
  const Clock::time_point now = Clock::now();
  auto check = [&](auto& container) {
    for (auto& seq : container) {
      if (seq->cancel_requested) {
        Finish(*seq, FinishReason::kCancelled);
      } else if (now >= seq->request.deadline) {
        Finish(*seq, FinishReason::kDeadline);
      }
    }
  };
  check(waiting_);
  check(running_);
  RemoveFinished();
}

Scheduler::SeqPtr Scheduler::Preempt(Sequence* seq) {
  // Recompute later: drop the KV cache and start over from the prompt plus
  // what was generated so far (its cached blocks stay cached, so the
  // recomputation usually starts from them).
  seq->blocks.Reset();
  seq->num_computed = 0;
  seq->state = SequenceState::kWaiting;
  ++seq->num_preemptions;
  ++preemptions_;
  auto it = std::find_if(running_.begin(), running_.end(),
                         [&](const SeqPtr& p) { return p.get() == seq; });
  SeqPtr out = std::move(*it);
  running_.erase(it);
  return out;
}

Scheduler::SeqPtr Scheduler::PreemptPlanned(Sequence* seq, StepPlan& plan) {
  auto it = std::find_if(plan.seqs.begin(), plan.seqs.end(),
                         [&](const ScheduledSequence& s) { return s.seq == seq; });
  if (it != plan.seqs.end()) {
    plan.num_tokens -= it->num_new_tokens;
    if (it->prefill) plan.num_prefill_tokens -= it->num_new_tokens;
    plan.seqs.erase(it);
  }
  return Preempt(seq);
}

// Schedules every running sequence (decode, or the next prefill chunk).
// Returns false when the budgets ran out before all of them were placed.
bool Scheduler::ScheduleRunning(StepPlan& plan) {
  for (auto it = running_.begin(); it != running_.end();) {
    Sequence* seq = it->get();
    const int32_t budget = options_.max_batched_tokens - plan.num_tokens;
    if (budget <= 0 || static_cast<int32_t>(plan.seqs.size()) >= options_.max_num_seqs) {
      return false;
    }
    const int32_t n = std::min(seq->num_uncomputed(), budget);
    if (!seq->blocks.EnsureCapacity(seq->num_computed + n).ok()) {
      // Out of blocks: preempt the newest (least urgent) sequence and retry
      // this one.
      Sequence* victim = running_.back().get();
      const bool self = victim == seq;
      waiting_.push_front(Preempt(victim));
      if (self) return false;
      continue;
    }
    const bool prefill = seq->num_uncomputed() > 1 || seq->num_generated() == 0;
    plan.seqs.push_back({seq, n, seq->num_computed + n == static_cast<int32_t>(seq->tokens.size()),
                         prefill});
    plan.num_tokens += n;
    if (prefill) plan.num_prefill_tokens += n;
    ++it;
  }
  return true;
}

// Moves waiting_[index] into the plan and the running list if the budgets
// and the KV cache allow it, starting after its cached prefix. The moved-from
// slot is left null.
Scheduler::AdmitResult Scheduler::TryAdmit(size_t index, StepPlan& plan) {
  Sequence* seq = waiting_[index].get();
  const int32_t budget = options_.max_batched_tokens - plan.num_tokens;
  if (budget <= 0) return AdmitResult::kNoTokenBudget;
  if (static_cast<int32_t>(plan.seqs.size()) >= options_.max_num_seqs) {
    return AdmitResult::kBatchFull;
  }
  const int32_t size = static_cast<int32_t>(seq->tokens.size());
  // At least the last token is computed: its logits are sampled.
  PrefixMatch match;
  if (seq->num_computed == 0) {
    match = allocator_.MatchPrefix(seq->tokens, size - 1, options_.prefix_cache_key);
  }
  const int32_t start = std::max(seq->num_computed, match.num_tokens);
  const int32_t n = std::min(size - start, budget);
  // A prompt this step would finish does not join a step that already
  // prefills prefill_group_tokens: see SchedulerOptions.
  if (options_.prefill_group_tokens > 0 && start + n == size &&
      plan.num_prefill_tokens >= options_.prefill_group_tokens) {
    return AdmitResult::kGroupFull;
  }
  // A waiting sequence holds no blocks; adopting evictable cached ones takes
  // them out of the free count.
  const int32_t need =
      allocator_.BlocksFor(start + n) - static_cast<int32_t>(match.blocks.size());
  if (need > allocator_.num_free() - match.num_evictable) return AdmitResult::kNoBlocks;
  if (!match.blocks.empty()) seq->num_computed = seq->blocks.AdoptPrefix(match);
  if (!seq->blocks.EnsureCapacity(start + n).ok()) return AdmitResult::kNoBlocks;
  plan.prefix_cache_queries += size;
  plan.prefix_cache_hits += match.num_tokens;
  if (seq->num_cached_prompt < 0) {
    seq->num_cached_prompt = std::min(match.num_tokens, seq->num_prompt);
  }
  seq->state = SequenceState::kRunning;
  if (!seq->first_scheduled) seq->first_scheduled = Clock::now();
  plan.seqs.push_back({seq, n, start + n == size, true});
  plan.num_tokens += n;
  plan.num_prefill_tokens += n;
  running_.push_back(std::move(waiting_[index]));
  return AdmitResult::kAdmitted;
}

// The oldest waiting sequence goes first, so none waits forever. The rest of
// the step is filled from a window of the queue, closest prompt length
// first, so that prompts prefilled together need little padding.
void Scheduler::AdmitWaiting(StepPlan& plan) {
  if (waiting_.empty() || TryAdmit(0, plan) != AdmitResult::kAdmitted) {
    std::erase(waiting_, nullptr);
    return;
  }
  const int32_t anchor = plan.seqs.back().num_new_tokens;
  const size_t window = std::min(waiting_.size(), size_t{kAdmissionWindow});
  std::vector<size_t> order;
  for (size_t i = 1; i < window; ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::abs(waiting_[a]->num_uncomputed() - anchor) <
           std::abs(waiting_[b]->num_uncomputed() - anchor);
  });
  for (size_t i : order) {
    const AdmitResult result = TryAdmit(i, plan);
    if (result != AdmitResult::kAdmitted && result != AdmitResult::kGroupFull) break;
  }
  std::erase(waiting_, nullptr);
}

StepPlan Scheduler::Schedule() {
  FinishCancelledAndExpired();
  StepPlan plan;
  if (options_.policy == SchedulingPolicy::kPriority) {
    ScheduleByPriority(plan);
  } else if (ScheduleRunning(plan)) {
    AdmitWaiting(plan);
  }
  return plan;
}

void Scheduler::AppendToken(Sequence& seq, const SampledToken& token) {
  seq.tokens.push_back(token.token_id);
  seq.sampler.Accept(token.token_id);
  if (!seq.first_token) seq.first_token = Clock::now();
  const StoppingCriteria& stop = seq.request.stopping;
  const bool is_stop_id = std::find(stop.stop_token_ids.begin(), stop.stop_token_ids.end(),
                                    token.token_id) != stop.stop_token_ids.end();
  const bool is_eos = !stop.ignore_eos && tokenizer_.IsEndOfGeneration(token.token_id);
  TokenEvent event;
  event.tokens.push_back({token.token_id, token.logprob, token.top});
  // Ending tokens are reported by id; their text is not part of the output.
  if (!is_stop_id && !is_eos) {
    StopMatcher::Result text = seq.stop_matcher.Push(seq.detokenizer.Push(token.token_id));
    event.text = std::move(text.text);
    seq.sink->OnTokens(std::move(event));
    if (text.stopped) return Finish(seq, FinishReason::kStop);
  } else {
    seq.sink->OnTokens(std::move(event));
  }
  if (is_stop_id) return Finish(seq, FinishReason::kStop);
  if (is_eos) return Finish(seq, FinishReason::kEos);
  if (seq.num_generated() >= stop.max_tokens ||
      static_cast<int32_t>(seq.tokens.size()) >= options_.context_length) {
    Finish(seq, FinishReason::kLength);
  }
}

void Scheduler::Postprocess(const StepPlan& plan, const std::vector<SampledToken>& sampled) {
  size_t next = 0;
  for (const ScheduledSequence& s : plan.seqs) {
    s.seq->num_computed += s.num_new_tokens;
    s.seq->blocks.CacheFullBlocks(s.seq->tokens, s.seq->num_computed, options_.prefix_cache_key);
    if (s.sample && next < sampled.size()) AppendToken(*s.seq, sampled[next++]);
  }
  RemoveFinished();
}

void Scheduler::FailStep(const StepPlan& plan, const absl::Status& status) {
  for (const ScheduledSequence& s : plan.seqs) Finish(*s.seq, FinishReason::kError, status);
  RemoveFinished();
}

void Scheduler::Finish(Sequence& seq, FinishReason reason, absl::Status status) {
  if (seq.state == SequenceState::kFinished) return;
  seq.state = SequenceState::kFinished;
  seq.blocks.Reset();
  const Clock::time_point now = Clock::now();
  const Clock::time_point arrival = seq.request.arrival;
  FinishEvent event;
  event.reason = reason;
  event.status = std::move(status);
  if (reason != FinishReason::kStop) {
    event.text = seq.stop_matcher.Push(seq.detokenizer.Flush()).text + seq.stop_matcher.Flush();
  }
  event.prompt_tokens = seq.num_prompt;
  event.completion_tokens = seq.num_generated();
  event.cached_prompt_tokens = std::max(0, seq.num_cached_prompt);
  event.timings.queue_seconds = Seconds(seq.first_scheduled.value_or(now) - arrival);
  event.timings.time_to_first_token_seconds =
      seq.first_token ? Seconds(*seq.first_token - arrival) : 0.0;
  event.timings.total_seconds = Seconds(now - arrival);
  seq.sink->OnFinish(std::move(event));
}

void Scheduler::RemoveFinished() {
  auto finished = [](const SeqPtr& s) { return s->state == SequenceState::kFinished; };
  std::erase_if(waiting_, finished);
  running_.remove_if(finished);
}

}  // namespace tessera
