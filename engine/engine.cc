#include "engine/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/engine_internal.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "spdlog/spdlog.h"

namespace tessera {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kDeadline:
      return "deadline";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

Engine::Engine(const EngineOptions& options, EngineObserver* observer)
    : options_(options), observer_(observer), state_(std::make_unique<EngineState>()) {}

Engine::~Engine() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options,
                                                       EngineObserver* observer) {
  if (options.block_size <= 0 || options.max_num_seqs <= 0 || options.max_batched_tokens <= 0 ||
      options.max_queued_requests < 0 || options.kv_cache_bytes < 0 ||
      options.max_consecutive_failed_steps <= 0 || options.prefill_group_tokens < -1) {
    return absl::InvalidArgumentError("engine options must be positive");
  }
  if (options.scheduling_policy != "fcfs" && options.scheduling_policy != "priority") {
    return absl::InvalidArgumentError(absl::StrCat("unknown scheduling policy '",
                                                   options.scheduling_policy,
                                                   "' (expected fcfs or priority)"));
  }
  if (!(options.priority_aging_seconds >= 0)) {
    return absl::InvalidArgumentError("priority_aging_seconds must be >= 0");
  }
  std::unique_ptr<Engine> engine(new Engine(options, observer));
  if (auto s = engine->Load(); !s.ok()) return s;
  engine->thread_ = std::thread([e = engine.get()] { e->Loop(); });
  return engine;
}

const Tokenizer& Engine::tokenizer() const { return *tokenizer_; }

absl::Status Engine::Submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) {
  if (auto s = ValidateRequest(request); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_ || stop_) return absl::UnavailableError("server is shutting down");
  if (!healthy_.load()) {
    return absl::UnavailableError("the engine is unhealthy after repeated step failures");
  }
  if (queued_submissions_ + stat_waiting_.load() >= options_.max_queued_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request queue is full (", options_.max_queued_requests, " waiting); retry later"));
  }
  ++queued_submissions_;
  idle_ = false;
  Command command(Command::kAdd);
  command.request_id = request.id;
  command.request = std::move(request);
  command.sink = std::move(sink);
  commands_.push_back(std::move(command));
  cv_.notify_one();
  return absl::OkStatus();
}

absl::Status Engine::ValidateRequest(const GenerationRequest& request) const {
  const int32_t vocab = info_.vocab_size;
  if (request.prompt_ids.empty()) return absl::InvalidArgumentError("prompt is empty");
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", id, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  const int64_t total =
      static_cast<int64_t>(request.prompt_ids.size()) + request.stopping.max_tokens;
  if (request.stopping.max_tokens < 1) return absl::InvalidArgumentError("max_tokens must be >= 1");
  if (total > info_.context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", request.prompt_ids.size(), " tokens) + max_tokens (",
        request.stopping.max_tokens, ") exceeds the context length ", info_.context_length));
  }
  return absl::OkStatus();
}

void Engine::Cancel(uint64_t request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Command command(Command::kCancel);
  command.request_id = request_id;
  commands_.push_back(std::move(command));
  cv_.notify_one();
}

void Engine::StopAccepting() {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_ = false;
}

bool Engine::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return idle_; });
}

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    accepting_ = false;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

EngineStats Engine::Stats() const {
  EngineStats s;
  s.requests_running = stat_running_.load();
  s.requests_waiting = stat_waiting_.load();
  s.kv_cache_usage_ratio = stat_kv_usage_.load();
  s.kv_cache_blocks = stat_kv_blocks_.load();
  s.kv_cache_cached_blocks = stat_cached_blocks_.load();
  s.preemptions = stat_preemptions_.load();
  s.healthy = healthy_.load();
  if (const int64_t started = step_started_ns_.load(); started != 0) {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    s.step_running_seconds = std::max<int64_t>(0, now - started) * 1e-9;
  }
  return s;
}

}  // namespace tessera
