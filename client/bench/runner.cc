#include "client/bench/runner.h"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

#include "client/bench/arrivals.h"
#include "client/bench/progress.h"

namespace tessera::bench {
namespace {

// How often blocked waits look at the interrupt flag, which a signal handler
// sets without notifying anyone.
constexpr std::chrono::milliseconds kPollInterval{50};
// Refresh period of the progress line (about 4 times a second).
constexpr std::chrono::milliseconds kProgressInterval{250};

}  // namespace

CallLauncher GrpcLauncher(std::vector<std::unique_ptr<tessera::v1::Inference::Stub>> stubs,
                          std::string api_key) {
  auto shared = std::make_shared<std::vector<std::unique_ptr<tessera::v1::Inference::Stub>>>(
      std::move(stubs));
  auto next = std::make_shared<size_t>(0);  // Launch runs on one thread
  return [shared, next, api_key](tessera::v1::GenerateRequest request, int64_t index, double timeout,
                        std::atomic<int64_t>* tokens, CallObserver* observer) -> BenchCall* {
    auto* stub = (*shared)[*next].get();
    *next = (*next + 1) % shared->size();
    auto* call = new GenerateCall(stub, std::move(request), index, timeout, tokens, observer);
    call->SetApiKey(api_key);
    return call;
  };
}

Runner::Runner(CallLauncher launcher, RequestFactory factory, double timeout_seconds,
               const std::atomic<bool>* interrupted)
    : launcher_(std::move(launcher)),
      factory_(std::move(factory)),
      timeout_seconds_(timeout_seconds),
      interrupted_(interrupted) {}

RunOutcome Runner::Run(const RunPlan& plan) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    records_.clear();
    sent_at_.clear();
  }
  tokens_received_ = 0;
  completed_ = 0;
  failed_ = 0;
  start_ = Clock::now();
  last_done_ = start_;
  std::atomic<bool> stop_progress{false};
  std::thread progress;
  if (plan.show_progress) progress = std::thread([&] { ProgressLoop(plan, &stop_progress); });

  IssueRequests(plan);
  WaitForAll();

  stop_progress = true;
  if (progress.joinable()) {
    progress.join();
    std::fputs("\r\033[K", stderr);  // erase the progress line
  }
  RunOutcome outcome;
  std::lock_guard<std::mutex> lock(mu_);
  outcome.records = std::move(records_);
  outcome.duration_seconds = std::chrono::duration<double>(last_done_ - start_).count();
  outcome.interrupted = Interrupted();
  return outcome;
}

void Runner::IssueRequests(const RunPlan& plan) {
  std::optional<ArrivalSchedule> arrivals;
  if (plan.request_rate) arrivals.emplace(*plan.request_rate, plan.burstiness, plan.seed);
  const auto past_duration = [&] {
    return plan.duration_seconds &&
           std::chrono::duration<double>(Clock::now() - start_).count() >= *plan.duration_seconds;
  };
  double next_arrival = 0.0;  // seconds after start_
  for (int64_t issued = 0; !plan.num_requests || issued < *plan.num_requests; ++issued) {
    if (arrivals) {
      if (!SleepUntil(After(next_arrival))) return;
      next_arrival += arrivals->NextGapSeconds();
    } else if (plan.ramp_up_seconds > 0 && issued < plan.max_in_flight) {
      if (!SleepUntil(After(plan.ramp_up_seconds * static_cast<double>(issued) /
                            plan.max_in_flight))) {
        return;
      }
    }
    if (past_duration()) return;
    if (plan.max_in_flight > 0 && !WaitForSlot(plan.max_in_flight)) return;
    if (past_duration() || Interrupted()) return;
    Launch(plan.first_index + issued);
  }
}

void Runner::Launch(int64_t index) {
  BenchCall* call = launcher_(factory_(index), index, timeout_seconds_, &tokens_received_, this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
    sent_at_[index] = std::chrono::duration<double>(Clock::now() - start_).count();
  }
  {
    std::lock_guard<std::recursive_mutex> lock(live_mu_);
    live_.insert(call);
  }
  call->Start();
}

Runner::Clock::time_point Runner::After(double seconds) const {
  return start_ + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(seconds));
}

bool Runner::SleepUntil(Clock::time_point when) {
  while (Clock::now() < when) {
    if (Interrupted()) return false;
    std::this_thread::sleep_until(std::min(when, Clock::now() + kPollInterval));
  }
  return !Interrupted();
}

bool Runner::WaitForSlot(int limit) {
  std::unique_lock<std::mutex> lock(mu_);
  while (in_flight_ >= limit) {
    if (Interrupted()) return false;
    cv_.wait_for(lock, kPollInterval);
  }
  return !Interrupted();
}

void Runner::WaitForAll() {
  bool cancelled = false;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (in_flight_ == 0) return;
      cv_.wait_for(lock, kPollInterval);
    }
    if (!cancelled && Interrupted()) {
      CancelAll();
      cancelled = true;
    }
  }
}

void Runner::CancelAll() {
  std::lock_guard<std::recursive_mutex> lock(live_mu_);
  // gRPC may finish a cancelled call inline, on this thread, which removes it
  // from live_ (hence the recursive mutex); iterating over a copy and checking
  // membership keeps every pointer used valid.
  const std::set<BenchCall*> calls = live_;
  for (BenchCall* call : calls) {
    if (live_.count(call) > 0) call->Cancel();
  }
}

void Runner::Detach(BenchCall* call) {
  std::lock_guard<std::recursive_mutex> lock(live_mu_);
  live_.erase(call);
}

void Runner::Finished(RequestRecord record) {
  (record.ok ? completed_ : failed_).fetch_add(1, std::memory_order_relaxed);
  if (on_finished_) on_finished_(record);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = sent_at_.find(record.index); it != sent_at_.end()) {
    record.sent_at = it->second;
    sent_at_.erase(it);
  }
  records_.push_back(std::move(record));
  last_done_ = Clock::now();
  --in_flight_;
  cv_.notify_all();
}

void Runner::ProgressLoop(const RunPlan& plan, const std::atomic<bool>* stop) {
  while (!stop->load()) {
    ProgressSnapshot snapshot;
    snapshot.completed = completed_.load(std::memory_order_relaxed);
    snapshot.failed = failed_.load(std::memory_order_relaxed);
    snapshot.total = plan.num_requests;
    snapshot.duration = plan.duration_seconds;
    snapshot.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    snapshot.tokens_received = tokens_received_.load(std::memory_order_relaxed);
    std::fprintf(stderr, "\r%s\033[K", FormatProgress(snapshot).c_str());
    std::fflush(stderr);
    for (auto waited = std::chrono::milliseconds(0); waited < kProgressInterval && !stop->load();
         waited += kPollInterval) {
      std::this_thread::sleep_for(kPollInterval);
    }
  }
}

}  // namespace tessera::bench
