// Command-line parsing for tessera-cli.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/tls_options.h"

namespace tessera::cli {

// Process exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // e.g. the server is not serving
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;
inline constexpr int kExitRequestFailed = 4;
inline constexpr int kExitInterrupted = 130;  // 128 + SIGINT

enum class Command { kHelp, kGenerate, kTokenize, kDetokenize, kInfo };

struct GenerateOptions {
  std::string prompt;
  std::optional<int32_t> max_tokens;
  std::optional<float> temperature;
  int32_t top_k = 0;
  std::optional<float> top_p;
  float min_p = 0.0f;
  std::optional<float> repetition_penalty;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t top_logprobs = 0;  // --logprobs N; N > 0 also asks for logprobs
  bool logprobs = false;
};

struct TokenizeOptions {
  std::string text;
  std::optional<bool> add_bos;  // unset: the model's default
};

struct Options {
  std::string server;            // HOST:PORT
  double timeout_seconds = 0.0;  // 0: no deadline
  client::ClientTls tls;         // --tls-ca, --tls-cert, --tls-key
  std::string api_key;           // sent as "authorization: Bearer KEY"; empty: none
  Command command = Command::kHelp;
  bool json = false;
  double wait_seconds = 0.0;     // info --wait
  GenerateOptions generate;
  TokenizeOptions tokenize;
  std::vector<int32_t> detokenize_ids;
};

// The default server: $TESSERA_SERVER when set, else localhost:50051.
std::string DefaultServer();
// The default API key: $TESSERA_API_KEY, else none.
std::string DefaultApiKey();

// Parses argv (without argv[0]). Errors are usage errors, worded for the user.
absl::StatusOr<Options> ParseArgs(const std::vector<std::string>& args);

// The --help text.
const char* UsageText();

}  // namespace tessera::cli
