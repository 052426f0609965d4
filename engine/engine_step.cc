// The engine thread's loop: drain commands, then one step of
// schedule → forward → sample → postprocess.
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "spdlog/spdlog.h"

namespace tessera {

void Engine::Loop() {
  while (true) {
    if (!DrainCommands(/*block=*/state_->scheduler->idle())) break;
    RunStep();
    PublishStats();
  }
  state_->scheduler->CancelAll();
  PublishStats();
}

bool Engine::DrainCommands(bool block) {
  std::deque<Command> commands;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (block) {
      if (state_->scheduler->idle() && commands_.empty()) {
        idle_ = true;
        idle_cv_.notify_all();
      }
      cv_.wait(lock, [&] { return stop_ || !commands_.empty(); });
    }
    if (stop_) return false;
    commands.swap(commands_);
    idle_ = false;
  }
  int32_t added = 0;
  for (Command& c : commands) {
    switch (c.kind) {
      case Command::kAdd:
        state_->scheduler->Add(std::move(c.request), std::move(c.sink));
        ++added;
        break;
      case Command::kCancel:
        state_->scheduler->Cancel(c.request_id);
        break;
      case Command::kRun:
        c.task();
        break;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Only the submissions taken above: ones queued since are still counted.
  queued_submissions_ -= added;
  stat_waiting_.store(state_->scheduler->num_waiting());
  return true;
}

void Engine::RecordStepOutcome(const absl::Status& status) {
  if (status.ok()) {
    failed_steps_in_a_row_ = 0;
    return;
  }
  if (++failed_steps_in_a_row_ == options_.max_consecutive_failed_steps) {
    spdlog::critical("{} engine steps failed in a row (last: {}); the engine is unhealthy and "
                     "refuses new requests",
                     failed_steps_in_a_row_, status.ToString());
    healthy_.store(false);
  }
}

void Engine::RunStep() {
  Scheduler& scheduler = *state_->scheduler;
  const uint64_t preemptions_before = scheduler.num_preemptions();
  const Clock::time_point start = Clock::now();
  StepPlan plan = scheduler.Schedule();
  // Schedule moved requests out of the queue: publish that before this step
  // emits tokens, or a client that answers a token with a new request would
  // be checked against the queue as it was before the step.
  PublishStats();
  if (observer_) {
    for (uint64_t i = preemptions_before; i < scheduler.num_preemptions(); ++i) {
      observer_->OnPreemption();
    }
  }
  if (plan.empty()) return;
  BuildStepBatch(plan, state_->allocator->block_size(), state_->batch);
  // Logits rows hold the model's whole vocabulary; only the ids the
  // tokenizer also knows are sampled.
  const int32_t stride = state_->model->config().vocab_size;
  const int32_t vocab = info_.vocab_size;
  step_started_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             Clock::now().time_since_epoch()).count());
  if (options_.stall_first_step_for_testing_ms > 0 && !test_stall_done_) {
    test_stall_done_ = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.stall_first_step_for_testing_ms));
  }
  if (options_.step_delay_for_testing_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.step_delay_for_testing_ms));
  }
  absl::Status forward = state_->model->Forward(state_->batch, state_->logits);
  step_started_ns_.store(0);
  if (absl::Status device = state_->model->backend().ConsumeError(); forward.ok()) {
    forward = device;
  }
  if (forward.ok() && steps_started_++ < options_.fail_first_steps_for_testing) {
    forward = absl::InternalError("step failure injected for testing");
  }
  RecordStepOutcome(forward);
  if (const absl::Status& s = forward; !s.ok()) {
    spdlog::error("engine step failed: {}", s.ToString());
    scheduler.FailStep(plan, s);
    return;
  }
  state_->sampled.clear();
  size_t row = 0;
  for (const ScheduledSequence& s : plan.seqs) {
    if (!s.sample) continue;
    std::span<float> logits(state_->logits.data() + row * stride, vocab);
    state_->sampled.push_back(s.seq->sampler.Sample(logits));
    ++row;
  }
  scheduler.Postprocess(plan, state_->sampled);
  if (observer_) {
    StepStats stats;
    stats.num_seqs = static_cast<int32_t>(plan.seqs.size());
    stats.num_tokens = plan.num_tokens;
    stats.num_prefill_tokens = plan.num_prefill_tokens;
    stats.prefix_cache_queries = plan.prefix_cache_queries;
    stats.prefix_cache_hits = plan.prefix_cache_hits;
    int32_t prefill_seqs = 0, longest = 0, prefill_rows = 0;
    for (const ScheduledSequence& s : plan.seqs) {
      if (s.num_new_tokens <= 1) continue;  // decode rows are not padded
      ++prefill_seqs;
      longest = std::max(longest, s.num_new_tokens);
      prefill_rows += s.num_new_tokens;
    }
    stats.num_prefill_slots = prefill_seqs * longest;
    stats.num_padded_tokens = stats.num_prefill_slots - prefill_rows;
    stats.step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    observer_->OnStep(stats);
  }
}

void Engine::PublishStats() {
  stat_running_.store(state_->scheduler->num_running());
  stat_waiting_.store(state_->scheduler->num_waiting());
  stat_kv_usage_.store(state_->allocator->usage_ratio());
  stat_kv_blocks_.store(state_->allocator->num_blocks());
  stat_cached_blocks_.store(state_->allocator->num_cached());
  stat_preemptions_.store(state_->scheduler->num_preemptions());
}

absl::StatusOr<std::vector<float>> Engine::DebugPromptLogits(
    const std::vector<int32_t>& prompt_ids) {
  GenerationRequest request;
  request.prompt_ids = prompt_ids;
  request.stopping.max_tokens = 1;
  if (auto s = ValidateRequest(request); !s.ok()) return s;
  std::promise<absl::StatusOr<std::vector<float>>> done;
  auto task = [&] {
    BlockTable table = state_->allocator->NewTable();
    const int32_t n = static_cast<int32_t>(prompt_ids.size());
    if (auto s = table.EnsureCapacity(n); !s.ok()) return done.set_value(s);
    StepBatch batch;
    batch.token_ids = prompt_ids;
    for (int32_t i = 0; i < n; ++i) {
      batch.positions.push_back(i);
      batch.attention.slot_mapping.push_back(table.Slot(i));
    }
    batch.attention.seqs.push_back({0, n, n, table.blocks().data()});
    batch.attention.num_tokens = n;
    batch.attention.block_size = state_->allocator->block_size();
    batch.attention.max_q_len = batch.attention.max_kv_len = n;
    batch.sample_rows.push_back(n - 1);
    std::vector<float> logits(state_->model->config().vocab_size);
    auto s = state_->model->Forward(batch, logits);
    if (absl::Status device = state_->model->backend().ConsumeError(); s.ok()) s = device;
    if (!s.ok()) return done.set_value(s);
    logits.resize(info_.vocab_size);
    done.set_value(std::move(logits));
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return absl::UnavailableError("engine stopped");
    Command command(Command::kRun);
    command.task = task;
    commands_.push_back(std::move(command));
    cv_.notify_one();
  }
  return done.get_future().get();
}

}  // namespace tessera
