// The engine's request and result types. These know nothing of gRPC: the
// server translates its protobuf messages into them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/sampler/sampler.h"

namespace tessera {

using Clock = std::chrono::steady_clock;

struct StoppingCriteria {
  int32_t max_tokens = 16;                 // >= 1; prompt + max_tokens <= context
  std::vector<std::string> stop_strings;   // generation ends before the first match
  std::vector<int32_t> stop_token_ids;     // generation ends after emitting one of these
  bool ignore_eos = false;                 // keep going past end-of-generation tokens
  bool include_stop_string = false;        // keep the matched stop string in the text
};

struct GenerationRequest {
  uint64_t id = 0;                   // unique per engine; assigned by the caller
  std::vector<int32_t> prompt_ids;   // non-empty, every id < vocab size
  SamplingParams sampling;
  StoppingCriteria stopping;
  // Generation stops with kDeadline when this passes (time_point::max(): none).
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point arrival = Clock::now();
  // Scheduling priority under the priority policy: lower is more urgent
  // (as vLLM). Ignored under fcfs.
  int32_t priority = 0;
};

enum class FinishReason {
  kLength,     // max_tokens reached (or the context filled up)
  kStop,       // a stop string or stop token id matched
  kEos,        // the model emitted an end-of-generation token
  kCancelled,  // the client cancelled
  kDeadline,   // the request's deadline passed
  kError,      // an internal error; see FinishEvent::status
};

const char* FinishReasonName(FinishReason reason);

struct GeneratedToken {
  int32_t token_id = 0;
  float logprob = 0.0f;                // valid when logprobs were requested
  std::vector<TokenLogprob> top;       // top_logprobs alternatives
};

// Tokens produced by one engine step for one request, with the text they
// completed (which may be empty while a UTF-8 character or a possible stop
// string is held back).
struct TokenEvent {
  std::vector<GeneratedToken> tokens;
  std::string text;
};

struct RequestTimings {
  double queue_seconds = 0;           // arrival to first scheduled
  double time_to_first_token_seconds = 0;
  double total_seconds = 0;           // arrival to finish
};

struct FinishEvent {
  FinishReason reason = FinishReason::kLength;
  absl::Status status;                // non-OK only with kError
  std::string text;                   // final text not yet sent in a TokenEvent
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  // Prompt tokens whose K/V came from the prefix cache instead of being
  // computed (when first scheduled).
  int32_t cached_prompt_tokens = 0;
  RequestTimings timings;
};

// Receives a request's results. Called on the engine thread only, in order;
// OnFinish is called exactly once and is the last call. Implementations must
// not block (queue the data and return).
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  virtual void OnTokens(TokenEvent event) = 0;
  virtual void OnFinish(FinishEvent event) = 0;
};

}  // namespace tessera
