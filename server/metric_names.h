// Every Prometheus metric the server exports, in one place. Names follow
// vLLM's (with the tessera_ prefix) and use base units (seconds, ratios).
#pragma once

namespace tessera::server::metric_names {

// Counters.
inline constexpr char kRequestSuccess[] = "tessera_request_success_total";
inline constexpr char kRequestFailure[] = "tessera_request_failure_total";
inline constexpr char kPromptTokens[] = "tessera_prompt_tokens_total";
inline constexpr char kGenerationTokens[] = "tessera_generation_tokens_total";
inline constexpr char kPreemptions[] = "tessera_preemptions_total";
inline constexpr char kStalledSteps[] = "tessera_engine_stalled_steps_total";
// Requests by front (grpc|http) and result (success|failure).
inline constexpr char kFrontRequests[] = "tessera_front_requests_total";
// Prefix cache lookups of admitted requests, in tokens (as vLLM counts
// them): tokens looked up, and of those found cached.
inline constexpr char kPrefixCacheQueries[] = "tessera_prefix_cache_queries_total";
inline constexpr char kPrefixCacheHits[] = "tessera_prefix_cache_hits_total";
// Requests refused for their API key, by front and reason (missing_key,
// malformed_header, invalid_key); also counted in kRequestFailure as
// UNAUTHENTICATED.
inline constexpr char kAuthFailures[] = "tessera_auth_failures_total";

// Histograms.
inline constexpr char kTimeToFirstToken[] = "tessera_time_to_first_token_seconds";
inline constexpr char kE2eLatency[] = "tessera_e2e_request_latency_seconds";
inline constexpr char kQueueTime[] = "tessera_request_queue_time_seconds";
inline constexpr char kInterTokenLatency[] = "tessera_inter_token_latency_seconds";
inline constexpr char kBatchSize[] = "tessera_batch_size";
inline constexpr char kIterationTokens[] = "tessera_iteration_tokens";
inline constexpr char kBatchPaddingRatio[] = "tessera_batch_padding_ratio";
// Engine steps (schedule, forward pass, sampling), by kind: "prefill" for a
// step that computes prompt tokens (decode rows may ride along), "decode"
// for one of decode rows only (as TGI's batch forward duration by method).
inline constexpr char kStepDuration[] = "tessera_engine_step_duration_seconds";

// Gauges.
inline constexpr char kRequestsRunning[] = "tessera_requests_running";
inline constexpr char kRequestsWaiting[] = "tessera_requests_waiting";
inline constexpr char kKvCacheUsage[] = "tessera_kv_cache_usage_ratio";
inline constexpr char kHttpConnections[] = "tessera_http_connections";
inline constexpr char kKvCacheCachedBlocks[] = "tessera_kv_cache_cached_blocks";

// Label names.
inline constexpr char kFinishReasonLabel[] = "finish_reason";
inline constexpr char kCodeLabel[] = "code";
inline constexpr char kFrontLabel[] = "front";
inline constexpr char kResultLabel[] = "result";
inline constexpr char kReasonLabel[] = "reason";
inline constexpr char kStepKindLabel[] = "kind";

}  // namespace tessera::server::metric_names
