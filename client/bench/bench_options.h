// Command-line options of tessera-bench.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/tls_options.h"

namespace tessera::bench {

// The priority of the --priority-mix requests (lower is more urgent).
inline constexpr int32_t kHighPriority = -1;

// Process exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;
inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT

struct Options {
  bool help = false;
  std::string server;  // HOST:PORT
  std::string backend = "grpc";  // grpc | openai-chat | openai-completions
  std::string base_url = "http://localhost:8000";
  std::string api_key;  // sent as "authorization: Bearer KEY" (both backends); empty: none
  int channels = 1;
  client::ClientTls tls;  // gRPC over TLS: --tls-ca, --tls-cert, --tls-key

  // Closed loop: `concurrency` requests always in flight. Open loop (when
  // request_rate is set): arrivals at request_rate per second, at most
  // max_concurrency in flight (0: no cap).
  int concurrency = 0;
  std::optional<double> request_rate;
  double burstiness = 1.0;
  int max_concurrency = 0;
  // Closed loop: the first `concurrency` requests start evenly spread over
  // this many seconds instead of all at once (0: at once), so that the
  // measured load is a steady one rather than one burst of simultaneous
  // arrivals.
  double ramp_up_seconds = 0.0;

  // How many requests: num_requests, or as many as start within
  // duration_seconds (the first limit reached ends the run).
  std::optional<int64_t> num_requests;
  std::optional<double> duration_seconds;

  std::string dataset;  // JSON-lines file; empty: random token-id prompts
  int input_len = 128;  // tokens per random prompt (per turn with multi_turn)
  // Random prompts start with one shared prefix of this many token ids (a
  // system prompt), followed by each request's own input_len ids.
  int shared_prefix_len = 0;
  // Conversations of this many turns (1: single requests): each turn sends
  // the whole history (shared prefix, earlier questions and the answers the
  // server gave) plus a new question of input_len ids.
  int multi_turn = 1;
  // Fraction of requests sent with priority kHighPriority (the rest 0);
  // latencies are also reported per priority.
  double priority_mix = 0.0;
  int max_tokens = 128;
  bool ignore_eos = false;
  double temperature = 0.0;
  uint64_t seed = 0;

  int warmup = 2;
  double timeout_seconds = 600.0;  // per-request deadline
  bool json = false;
  std::string save_requests;  // JSON lines, one per measured request; empty: none

  bool open_loop() const { return request_rate.has_value(); }
};

// $TESSERA_SERVER when set, else localhost:50051.
std::string DefaultServer();

// Parses argv without argv[0]; fills defaults that depend on other flags.
// Errors are usage errors (INVALID_ARGUMENT), worded for the user.
absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args);

// The --help text.
std::string HelpText();

}  // namespace tessera::bench
