// Prometheus metrics of the server and its engine, exposed over HTTP at
// /metrics. All recording methods are thread-safe and never block on the
// engine: engine gauges are refreshed by a background thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/request.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace tessera::server {

// Which API a request came through (the `front` label).
enum class Front { kGrpc, kHttp };

class Metrics : public EngineObserver {
 public:
  Metrics();
  ~Metrics() override;

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Refreshes the engine gauges from `read_stats` every `period` until
  // StopStatsUpdates(). `read_stats` returns nullopt while no engine runs.
  void StartStatsUpdates(std::function<std::optional<EngineStats>()> read_stats,
                         std::chrono::milliseconds period);
  void StopStatsUpdates();

  // A request the engine finished (any reason), with the status its client
  // gets: counts its tokens and latencies, and a success or failure.
  void RecordFinished(const FinishEvent& event, const grpc::Status& status,
                      Front front = Front::kGrpc);
  // A request refused or failed before the engine ran it.
  void RecordFailure(grpc::StatusCode code, Front front = Front::kGrpc);
  // A request refused for its API key (`reason`: see auth::RefusalName).
  void RecordAuthFailure(const std::string& reason, Front front);
  // Open HTTP connections (+1 on accept, -1 on close).
  void AddHttpConnections(int delta);
  // The metrics in Prometheus' text format (what /metrics serves).
  std::string Scrape() const;
  // Time between two token events of one request.
  void RecordInterTokenLatency(double seconds);
  // An engine step that ran past the step watchdog's limit.
  void RecordStalledStep();

  // EngineObserver (called on the engine thread).
  void OnStep(const StepStats& stats) override;
  void OnPreemption() override;

 private:
  void UpdateEngineGauges(const EngineStats& stats);
  void StatsLoop(std::function<std::optional<EngineStats>()> read_stats,
                 std::chrono::milliseconds period);

  std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>* success_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* failure_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* front_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* auth_failure_family_ = nullptr;
  prometheus::Gauge* http_connections_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Counter* stalled_steps_ = nullptr;
  prometheus::Counter* prefix_cache_queries_ = nullptr;
  prometheus::Counter* prefix_cache_hits_ = nullptr;
  prometheus::Histogram* time_to_first_token_ = nullptr;
  prometheus::Histogram* e2e_latency_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Histogram* inter_token_latency_ = nullptr;
  prometheus::Histogram* batch_size_ = nullptr;
  prometheus::Histogram* iteration_tokens_ = nullptr;
  prometheus::Histogram* padding_ratio_ = nullptr;
  prometheus::Histogram* prefill_step_duration_ = nullptr;
  prometheus::Histogram* decode_step_duration_ = nullptr;
  prometheus::Gauge* requests_running_ = nullptr;
  prometheus::Gauge* requests_waiting_ = nullptr;
  prometheus::Gauge* kv_cache_usage_ = nullptr;
  prometheus::Gauge* kv_cache_cached_blocks_ = nullptr;

  std::mutex updater_mu_;
  std::condition_variable updater_cv_;
  bool updater_stop_ = false;  // guarded by updater_mu_
  std::thread updater_;
};

}  // namespace tessera::server
