// Drives a benchmark run: issues Generate calls in a closed or open loop and
// collects their measurements.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "client/bench/generate_call.h"
#include "client/bench/timeline.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::bench {

// Builds the request with the given sequence index.
using RequestFactory = std::function<tessera::v1::GenerateRequest(int64_t index)>;

// Creates the call for a request (gRPC Generate or an OpenAI HTTP stream);
// it reports to `observer` and deletes itself when done.
using CallLauncher = std::function<BenchCall*(
    tessera::v1::GenerateRequest request, int64_t index, double timeout_seconds,
    std::atomic<int64_t>* tokens_received, CallObserver* observer)>;

// A launcher of gRPC Generate calls spread over `stubs` in turn.
CallLauncher GrpcLauncher(std::vector<std::unique_ptr<tessera::v1::Inference::Stub>> stubs,
                          std::string api_key = "");

struct RunPlan {
  std::optional<int64_t> num_requests;     // unset: until duration_seconds
  std::optional<double> duration_seconds;  // stop issuing after this
  int max_in_flight = 0;                   // 0: no limit (open loop only)
  // Closed loop: request i < max_in_flight is sent no earlier than
  // i * ramp_up_seconds / max_in_flight after the start.
  double ramp_up_seconds = 0.0;
  std::optional<double> request_rate;      // set: open loop, requests/s
  double burstiness = 1.0;
  uint64_t seed = 0;                       // of the arrival schedule
  int64_t first_index = 0;                 // index of the first request
  bool show_progress = false;              // live line on stderr
};

struct RunOutcome {
  std::vector<RequestRecord> records;  // in order of completion
  double duration_seconds = 0.0;       // first send to last final status
  bool interrupted = false;
};

class Runner final : public CallObserver {
 public:
  // Requests go to the stubs in turn. `interrupted` is polled (it may be set
  // by a signal handler): once true, no request starts and in-flight ones
  // are cancelled.
  Runner(CallLauncher launcher, RequestFactory factory, double timeout_seconds,
         const std::atomic<bool>* interrupted);

  RunOutcome Run(const RunPlan& plan);
  // Called with each finished request before the next one is built (on a
  // gRPC thread).
  void SetOnFinished(std::function<void(const RequestRecord&)> on_finished) {
    on_finished_ = std::move(on_finished);
  }

  void Detach(BenchCall* call) override;
  void Finished(RequestRecord record) override;

 private:
  using Clock = std::chrono::steady_clock;

  void IssueRequests(const RunPlan& plan);
  void Launch(int64_t index);
  // The time `seconds` after the run's start.
  Clock::time_point After(double seconds) const;
  // Sleeps until `when`; false when interrupted first.
  bool SleepUntil(Clock::time_point when);
  // Waits until fewer than `limit` calls are in flight; false when interrupted.
  bool WaitForSlot(int limit);
  // Waits for every call to end, cancelling them all once interrupted.
  void WaitForAll();
  void CancelAll();
  void ProgressLoop(const RunPlan& plan, const std::atomic<bool>* stop);
  bool Interrupted() const { return interrupted_->load(std::memory_order_relaxed); }

  CallLauncher launcher_;
  RequestFactory factory_;
  std::function<void(const RequestRecord&)> on_finished_;
  double timeout_seconds_;
  const std::atomic<bool>* interrupted_;

  Clock::time_point start_;
  std::atomic<int64_t> tokens_received_{0};
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> failed_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;                   // guarded by mu_
  std::vector<RequestRecord> records_;  // guarded by mu_
  std::map<int64_t, double> sent_at_;   // index -> seconds from start_; guarded by mu_
  Clock::time_point last_done_;         // guarded by mu_

  std::recursive_mutex live_mu_;
  std::set<BenchCall*> live_;  // calls not yet detached; guarded by live_mu_
};

}  // namespace tessera::bench
