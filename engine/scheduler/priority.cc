// The priority scheduling policy (--scheduling-policy priority).
//
// A step is built in two passes:
//  1. decodes: every running sequence past its prefill gets its next token,
//     most urgent first, so that every stream keeps flowing. The exception:
//     while a request of a more urgent class waits for its prefill, the
//     decodes of less urgent classes pause, and its prefill gets the whole
//     token budget (its first token is what its caller waits for). Decodes
//     of its own class go first only as far as they do not add a step to
//     that prefill; the rest follow it in the same step when it leaves room
//     (or when it could not be placed);
//  2. prefill work, the next chunks of running sequences and the admission
//     of waiting ones alike, most urgent first. A more urgent waiting
//     request preempts the least urgent running sequence when the batch
//     (--max-num-seqs) or the KV cache is full.
// A step that prefills a request of the most urgent priority class present
// prefills nothing of a less urgent class after it, so that an urgent
// request's first token costs one short step, not a step shared with bulk
// prefill. A less urgent request that aging has moved ahead of it still
// goes first: the starvation bound holds.
#include <algorithm>
#include <limits>

#include "engine/scheduler/scheduler.h"

namespace tessera {
namespace {

bool NeedsPrefill(const Sequence& seq) {
  return seq.num_uncomputed() > 1 || seq.num_generated() == 0;
}

}  // namespace

bool Scheduler::MoreUrgent(const Sequence& a, const Sequence& b) const {
  const GenerationRequest& x = a.request;
  const GenerationRequest& y = b.request;
  const double aging = options_.priority_aging_seconds;
  if (aging > 0) {
    // priority - (now - arrival) / aging, ordered: the same order at any now.
    auto key = [&](const GenerationRequest& r) {
      return std::chrono::duration<double>(r.arrival.time_since_epoch()).count() +
             r.priority * aging;
    };
    const double kx = key(x), ky = key(y);
    if (kx != ky) return kx < ky;
  } else if (x.priority != y.priority) {
    return x.priority < y.priority;
  }
  if (x.arrival != y.arrival) return x.arrival < y.arrival;
  return x.id < y.id;
}

void Scheduler::ScheduleByPriority(StepPlan& plan) {
  running_.sort([&](const SeqPtr& a, const SeqPtr& b) { return MoreUrgent(*a, *b); });
  std::stable_sort(waiting_.begin(), waiting_.end(),
                   [&](const SeqPtr& a, const SeqPtr& b) { return MoreUrgent(*a, *b); });
  std::vector<Sequence*> deferred;
  if (!ScheduleDecodes(plan, MostUrgentPrefill(), deferred)) return;
  PrefillByPriority(plan);
  // After a placed prefill nothing is preempted for a deferred decode (the
  // newest running sequence may be the one just admitted): one that finds no
  // free KV block waits a step. Without one, room is made as usual, so that
  // the step is never empty while sequences run.
  const bool may_preempt = plan.num_prefill_tokens == 0;
  for (Sequence* seq : deferred) {
    // A deferred sequence preempted by the prefill pass is waiting now.
    if (seq->state != SequenceState::kRunning) continue;
    const DecodeResult result = PlaceDecode(seq, plan, may_preempt);
    if (result == DecodeResult::kNoBudget || result == DecodeResult::kPreempted) break;
  }
}

// The most urgent sequence that needs prefill, running or waiting; null when
// none does.
const Sequence* Scheduler::MostUrgentPrefill() const {
  const Sequence* best = waiting_.empty() ? nullptr : waiting_.front().get();
  for (const SeqPtr& seq : running_) {
    if (NeedsPrefill(*seq) && (best == nullptr || MoreUrgent(*seq, *best))) best = seq.get();
  }
  return best;
}

// Decode tokens per step that `urgent`'s class may take before its prefill
// without making that prefill take more steps: a 128-token prompt with a
// 64-token budget has no room; a 100-token one leaves 14 per step.
int32_t Scheduler::SameClassDecodeRoom(const Sequence& urgent) const {
  const int32_t budget = options_.max_batched_tokens;
  const int32_t left = std::max(1, urgent.num_uncomputed());
  const int32_t steps = (left + budget - 1) / budget;
  return (steps * budget - left) / steps;
}

// One decode token for a running sequence past its prefill. Out of KV
// blocks, the last running sequence makes room, which may be `seq`; or,
// unless `may_preempt`, `seq` waits a step (kNoBlocks).
Scheduler::DecodeResult Scheduler::PlaceDecode(Sequence* seq, StepPlan& plan, bool may_preempt) {
  while (true) {
    if (plan.num_tokens >= options_.max_batched_tokens ||
        static_cast<int32_t>(plan.seqs.size()) >= options_.max_num_seqs) {
      return DecodeResult::kNoBudget;
    }
    if (seq->blocks.EnsureCapacity(seq->num_computed + 1).ok()) break;
    if (!may_preempt) return DecodeResult::kNoBlocks;
    Sequence* victim = running_.back().get();
    waiting_.push_front(PreemptPlanned(victim, plan));
    if (victim == seq) return DecodeResult::kPreempted;
  }
  plan.seqs.push_back({seq, 1, true, false});
  plan.num_tokens += 1;
  return DecodeResult::kPlaced;
}

// Returns false when the budgets ran out before every decode was placed.
// Decodes of a less urgent class than `urgent`'s, and behind it in the
// (aged) order, pause for this step; aging ends the pause of a sequence
// that has waited long enough, so the starvation bound still holds. Decodes
// of `urgent`'s class past SameClassDecodeRoom go to `deferred`.
bool Scheduler::ScheduleDecodes(StepPlan& plan, const Sequence* urgent,
                                std::vector<Sequence*>& deferred) {
  int32_t room = urgent != nullptr ? SameClassDecodeRoom(*urgent) : 0;
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    Sequence* seq = it->get();
    if (NeedsPrefill(*seq)) continue;
    if (urgent != nullptr && urgent->request.priority < seq->request.priority &&
        MoreUrgent(*urgent, *seq)) {
      continue;  // paused
    }
    if (urgent != nullptr && urgent->request.priority == seq->request.priority &&
        room-- <= 0) {
      deferred.push_back(seq);
      continue;
    }
    // Only a sequence behind `seq` or `seq` itself (which ends the loop) is
    // preempted, so `it` stays valid.
    if (PlaceDecode(seq, plan, true) != DecodeResult::kPlaced) return false;
  }
  return true;
}

Sequence* Scheduler::VictimFor(const Sequence& seq) const {
  auto victim = std::max_element(running_.begin(), running_.end(),
                                 [&](const SeqPtr& a, const SeqPtr& b) {
                                   return MoreUrgent(*a, *b);
                                 });
  if (victim == running_.end() || victim->get() == &seq || !MoreUrgent(seq, **victim)) {
    return nullptr;
  }
  return victim->get();
}

// The next prefill chunk of a running sequence; false when it does not fit.
bool Scheduler::PlacePrefillChunk(Sequence* seq, StepPlan& plan,
                                  std::vector<SeqPtr>& preempted) {
  const int32_t budget = options_.max_batched_tokens - plan.num_tokens;
  if (budget <= 0 || static_cast<int32_t>(plan.seqs.size()) >= options_.max_num_seqs) {
    return false;
  }
  const int32_t n = std::min(seq->num_uncomputed(), budget);
  while (!seq->blocks.EnsureCapacity(seq->num_computed + n).ok()) {
    Sequence* victim = VictimFor(*seq);
    if (victim == nullptr) return false;
    preempted.push_back(PreemptPlanned(victim, plan));
  }
  plan.seqs.push_back(
      {seq, n, seq->num_computed + n == static_cast<int32_t>(seq->tokens.size()), true});
  plan.num_tokens += n;
  plan.num_prefill_tokens += n;
  return true;
}

// Admits a waiting sequence, preempting less urgent running ones while the
// batch or the KV cache is full.
Scheduler::AdmitResult Scheduler::AdmitUrgent(Sequence* seq, StepPlan& plan,
                                              std::vector<SeqPtr>& preempted) {
  const auto slot = std::find_if(waiting_.begin(), waiting_.end(),
                                 [&](const SeqPtr& p) { return p.get() == seq; });
  const size_t index = static_cast<size_t>(slot - waiting_.begin());
  while (true) {
    AdmitResult result = static_cast<int32_t>(running_.size()) >= options_.max_num_seqs
                             ? AdmitResult::kBatchFull
                             : TryAdmit(index, plan);
    if (result != AdmitResult::kBatchFull && result != AdmitResult::kNoBlocks) return result;
    Sequence* victim = VictimFor(*seq);
    if (victim == nullptr) return result;
    preempted.push_back(PreemptPlanned(victim, plan));
  }
}

// Most urgent first, stopping at the first that does not fit; nothing less
// urgent than a sequence preempted this step is placed in its stead.
void Scheduler::PrefillByPriority(StepPlan& plan) {
  std::vector<Sequence*> order;
  for (const SeqPtr& seq : running_) {
    if (NeedsPrefill(*seq)) order.push_back(seq.get());
  }
  for (const SeqPtr& seq : waiting_) order.push_back(seq.get());
  std::stable_sort(order.begin(), order.end(),
                   [&](const Sequence* a, const Sequence* b) { return MoreUrgent(*a, *b); });
  int32_t best_class = std::numeric_limits<int32_t>::max();
  for (const Sequence* seq : order) best_class = std::min(best_class, seq->request.priority);

  std::vector<SeqPtr> preempted;
  const Sequence* most_urgent_victim = nullptr;
  bool urgent_placed = false;
  for (Sequence* seq : order) {
    if (most_urgent_victim != nullptr && !MoreUrgent(*seq, *most_urgent_victim)) break;
    if (urgent_placed && seq->request.priority > best_class) continue;
    const size_t before = preempted.size();
    const bool placed = seq->state == SequenceState::kRunning
                            ? PlacePrefillChunk(seq, plan, preempted)
                            : AdmitUrgent(seq, plan, preempted) == AdmitResult::kAdmitted;
    for (size_t i = before; i < preempted.size(); ++i) {
      if (!most_urgent_victim || MoreUrgent(*preempted[i], *most_urgent_victim)) {
        most_urgent_victim = preempted[i].get();
      }
    }
    if (!placed) break;
    if (seq->request.priority == best_class) urgent_placed = true;
  }
  std::erase(waiting_, nullptr);
  for (SeqPtr& p : preempted) waiting_.push_back(std::move(p));
}

}  // namespace tessera
