#include "server/metrics.h"

#include <chrono>
#include <string>
#include <utility>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "server/convert.h"
#include "server/metric_names.h"
#include "server/status.h"

namespace tessera::server {
namespace {

namespace names = metric_names;
using prometheus::Histogram;

// Request-level latencies, in seconds: 1 ms to 60 s.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const Histogram::BucketBoundaries buckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.25, 0.5,
      0.75,  1.0,    2.5,   5.0,  7.5,   10.0, 20.0,  30.0, 40.0, 60.0};
  return buckets;
}

// Time between tokens, in seconds: 0.1 ms to 2.5 s (small models are fast).
const Histogram::BucketBoundaries& InterTokenBuckets() {
  static const Histogram::BucketBoundaries buckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075,
      0.1,    0.15,    0.2,    0.3,   0.4,    0.5,   0.75, 1.0,   2.5};
  return buckets;
}

// Engine steps, in seconds: 0.25 ms (a small model's decode step) to 30 s
// (a long prompt's prefill on a CPU).
const Histogram::BucketBoundaries& StepBuckets() {
  static const Histogram::BucketBoundaries buckets = {
      0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
      0.075,   0.1,    0.25,  0.5,    1.0,   2.5,    5.0,  10.0,  30.0};
  return buckets;
}

// Counts (sequences or tokens per step): powers of two.
Histogram::BucketBoundaries PowersOfTwo(int max_exponent) {
  Histogram::BucketBoundaries buckets;
  for (int e = 0; e <= max_exponent; ++e) buckets.push_back(static_cast<double>(1 << e));
  return buckets;
}

prometheus::Histogram& AddHistogram(prometheus::Registry& registry, const char* name,
                                    const char* help, const Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

prometheus::Counter& AddCounter(prometheus::Registry& registry, const char* name,
                                const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Gauge& AddGauge(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  success_family_ = &prometheus::BuildCounter()
                         .Name(names::kRequestSuccess)
                         .Help("Requests finished normally, by finish reason.")
                         .Register(r);
  failure_family_ = &prometheus::BuildCounter()
                         .Name(names::kRequestFailure)
                         .Help("Requests refused or failed, by gRPC status code.")
                         .Register(r);
  front_family_ = &prometheus::BuildCounter()
                       .Name(names::kFrontRequests)
                       .Help("Requests by front (grpc, http) and result (success, failure).")
                       .Register(r);
  auth_failure_family_ = &prometheus::BuildCounter()
                              .Name(names::kAuthFailures)
                              .Help("Requests refused for their API key, by front and reason.")
                              .Register(r);
  // Every series from the start (at 0), so that rates and alerts see them
  // before the first refusal.
  for (const char* front : {"grpc", "http"}) {
    for (const char* reason : {"missing_key", "malformed_header", "invalid_key"}) {
      auth_failure_family_->Add({{names::kFrontLabel, front}, {names::kReasonLabel, reason}});
    }
  }
  http_connections_ = &AddGauge(r, names::kHttpConnections, "Open HTTP connections.");
  prompt_tokens_ = &AddCounter(r, names::kPromptTokens, "Prompt tokens of finished requests.");
  generation_tokens_ = &AddCounter(r, names::kGenerationTokens, "Generated tokens.");
  preemptions_ = &AddCounter(r, names::kPreemptions,
                             "Requests preempted to free KV cache or for a more urgent request.");
  prefix_cache_queries_ = &AddCounter(r, names::kPrefixCacheQueries,
                                      "Prompt tokens looked up in the prefix cache.");
  prefix_cache_hits_ = &AddCounter(r, names::kPrefixCacheHits,
                                   "Prompt tokens found in the prefix cache (not computed).");
  stalled_steps_ = &AddCounter(r, names::kStalledSteps,
                               "Engine steps that ran longer than the step watchdog's limit.");
  time_to_first_token_ =
      &AddHistogram(r, names::kTimeToFirstToken, "Arrival to first generated token, in seconds.",
                    LatencyBuckets());
  e2e_latency_ =
      &AddHistogram(r, names::kE2eLatency, "Arrival to finish, in seconds.", LatencyBuckets());
  queue_time_ = &AddHistogram(r, names::kQueueTime, "Arrival to first scheduled, in seconds.",
                              LatencyBuckets());
  inter_token_latency_ =
      &AddHistogram(r, names::kInterTokenLatency,
                    "Time between token events of a request, in seconds.", InterTokenBuckets());
  batch_size_ = &AddHistogram(r, names::kBatchSize, "Sequences per engine step.", PowersOfTwo(9));
  iteration_tokens_ = &AddHistogram(r, names::kIterationTokens, "Tokens computed per engine step.",
                                    PowersOfTwo(14));
  padding_ratio_ = &AddHistogram(
      r, names::kBatchPaddingRatio,
      "Fraction of padded slots in the padded prefill attention layout, per step with prefill.",
      prometheus::Histogram::BucketBoundaries{0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0});
  auto& steps = prometheus::BuildHistogram()
                    .Name(names::kStepDuration)
                    .Help("Engine steps (schedule, forward pass, sampling) by kind: prefill "
                          "(prompt tokens computed) or decode, in seconds.")
                    .Register(r);
  prefill_step_duration_ = &steps.Add({{names::kStepKindLabel, "prefill"}}, StepBuckets());
  decode_step_duration_ = &steps.Add({{names::kStepKindLabel, "decode"}}, StepBuckets());
  requests_running_ = &AddGauge(r, names::kRequestsRunning, "Requests being generated.");
  requests_waiting_ = &AddGauge(r, names::kRequestsWaiting, "Requests waiting to be scheduled.");
  kv_cache_usage_ = &AddGauge(r, names::kKvCacheUsage, "Fraction of KV cache blocks in use.");
  kv_cache_cached_blocks_ =
      &AddGauge(r, names::kKvCacheCachedBlocks,
                "KV cache blocks held by the prefix cache, in use or evictable.");
  // Pre-create the usual series so that they are scraped (as 0) from the start.
  for (auto reason :
       {FinishReason::kLength, FinishReason::kStop, FinishReason::kEos, FinishReason::kCancelled}) {
    success_family_->Add({{names::kFinishReasonLabel, std::string(FinishReasonName(reason))}});
  }
  for (const char* front : {"grpc", "http"}) {
    for (const char* result : {"success", "failure"}) {
      front_family_->Add({{names::kFrontLabel, front}, {names::kResultLabel, result}});
    }
  }
}

Metrics::~Metrics() { StopStatsUpdates(); }

void Metrics::StartStatsUpdates(std::function<std::optional<EngineStats>()> read_stats,
                                std::chrono::milliseconds period) {
  StopStatsUpdates();
  {
    std::lock_guard<std::mutex> lock(updater_mu_);
    updater_stop_ = false;
  }
  updater_ = std::thread([this, read = std::move(read_stats), period]() mutable {
    StatsLoop(std::move(read), period);
  });
}

void Metrics::StopStatsUpdates() {
  {
    std::lock_guard<std::mutex> lock(updater_mu_);
    updater_stop_ = true;
  }
  updater_cv_.notify_all();
  if (updater_.joinable()) updater_.join();
}

void Metrics::StatsLoop(std::function<std::optional<EngineStats>()> read_stats,
                        std::chrono::milliseconds period) {
  std::unique_lock<std::mutex> lock(updater_mu_);
  while (!updater_stop_) {
    lock.unlock();
    if (std::optional<EngineStats> stats = read_stats()) UpdateEngineGauges(*stats);
    lock.lock();
    updater_cv_.wait_for(lock, period, [this] { return updater_stop_; });
  }
}

void Metrics::UpdateEngineGauges(const EngineStats& stats) {
  requests_running_->Set(stats.requests_running);
  requests_waiting_->Set(stats.requests_waiting);
  kv_cache_usage_->Set(stats.kv_cache_usage_ratio);
  kv_cache_cached_blocks_->Set(stats.kv_cache_cached_blocks);
}

namespace {
const char* FrontName(Front front) { return front == Front::kHttp ? "http" : "grpc"; }
}  // namespace

void Metrics::RecordFinished(const FinishEvent& event, const grpc::Status& status, Front front) {
  prompt_tokens_->Increment(event.prompt_tokens);
  generation_tokens_->Increment(event.completion_tokens);
  e2e_latency_->Observe(event.timings.total_seconds);
  if (event.completion_tokens > 0) {
    time_to_first_token_->Observe(event.timings.time_to_first_token_seconds);
  }
  // A request cancelled while still waiting was never scheduled.
  if (event.completion_tokens > 0 || event.timings.queue_seconds > 0) {
    queue_time_->Observe(event.timings.queue_seconds);
  }
  if (status.ok()) {
    success_family_
        ->Add({{names::kFinishReasonLabel, std::string(FinishReasonName(event.reason))}})
        .Increment();
    front_family_->Add({{names::kFrontLabel, FrontName(front)}, {names::kResultLabel, "success"}})
        .Increment();
  } else {
    RecordFailure(status.error_code(), front);
  }
}

void Metrics::RecordFailure(grpc::StatusCode code, Front front) {
  failure_family_->Add({{names::kCodeLabel, std::string(GrpcCodeName(code))}}).Increment();
  front_family_->Add({{names::kFrontLabel, FrontName(front)}, {names::kResultLabel, "failure"}})
      .Increment();
}

void Metrics::RecordAuthFailure(const std::string& reason, Front front) {
  auth_failure_family_->Add({{names::kFrontLabel, FrontName(front)}, {names::kReasonLabel, reason}})
      .Increment();
  RecordFailure(grpc::StatusCode::UNAUTHENTICATED, front);
}

void Metrics::AddHttpConnections(int delta) {
  if (delta > 0) {
    http_connections_->Increment(delta);
  } else {
    http_connections_->Decrement(-delta);
  }
}

std::string Metrics::Scrape() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void Metrics::RecordInterTokenLatency(double seconds) { inter_token_latency_->Observe(seconds); }

void Metrics::OnStep(const StepStats& stats) {
  batch_size_->Observe(stats.num_seqs);
  iteration_tokens_->Observe(stats.num_tokens);
  (stats.num_prefill_tokens > 0 ? prefill_step_duration_ : decode_step_duration_)
      ->Observe(stats.step_seconds);
  if (stats.prefix_cache_queries > 0) {
    prefix_cache_queries_->Increment(static_cast<double>(stats.prefix_cache_queries));
    prefix_cache_hits_->Increment(static_cast<double>(stats.prefix_cache_hits));
  }
  if (stats.num_prefill_slots > 0) {
    padding_ratio_->Observe(static_cast<double>(stats.num_padded_tokens) /
                            stats.num_prefill_slots);
  }
}

void Metrics::OnPreemption() { preemptions_->Increment(); }

void Metrics::RecordStalledStep() { stalled_steps_->Increment(); }

}  // namespace tessera::server
