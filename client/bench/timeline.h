// Per-request latency bookkeeping of a streamed generation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::bench {

// What one request measured. Times are in seconds from the moment the
// request was sent.
struct RequestRecord {
  int64_t index = 0;        // position in the run's request sequence
  bool ok = false;          // the stream ended with gRPC status OK
  int status_code = 0;      // grpc::StatusCode of the final status
  std::string error_message;
  double ttft = 0.0;        // to the first message carrying a token
  double e2e = 0.0;         // to the final status
  std::vector<double> itl;  // one gap per token after the first
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // from the final message's usage
  int32_t priority = 0;              // the request's
  double sent_at = 0.0;              // seconds from the run's start to the send
  // The server's own account (gRPC Timings of the last message); -1 when the
  // backend reports none.
  double server_queue = -1.0;
  double server_ttft = -1.0;
  std::vector<int32_t> output_ids;   // the generated token ids

  // (e2e - ttft) / (output_tokens - 1); 0 with fewer than two tokens.
  double Tpot() const;
};

// Turns the arrival times of streamed messages into TTFT and inter-token
// latencies. A message carrying k > 1 tokens spreads the gap since the
// previous token-carrying message evenly over its k tokens (k samples of
// gap / k); tokens that come with the first token count as gaps of 0. So a
// request with n tokens has n - 1 ITL samples summing to the time between its
// first and last token.
class TokenTimeline {
 public:
  // A message with `tokens` generated tokens arrived `seconds` after send.
  void OnMessage(double seconds, int64_t tokens);
  // The final status arrived `seconds` after send.
  void OnDone(double seconds) { e2e_ = seconds; }

  // Copies ttft, e2e, itl and output_tokens into `record`.
  void FillRecord(RequestRecord& record) const;

  double ttft() const { return ttft_; }
  int64_t tokens() const { return tokens_; }
  const std::vector<double>& itl() const { return itl_; }

 private:
  double ttft_ = 0.0;
  double last_ = 0.0;  // arrival of the latest token-carrying message
  double e2e_ = 0.0;
  int64_t tokens_ = 0;
  std::vector<double> itl_;
};

}  // namespace tessera::bench
