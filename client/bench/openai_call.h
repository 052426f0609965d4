// The benchmark over an OpenAI-compatible HTTP API (Tessera's HTTP front,
// llama.cpp's llama-server, vLLM...): each request is one streamed
// /v1/completions or /v1/chat/completions call, on a kept-alive connection
// of an earlier call when one is idle (as the openai SDKs and vLLM's
// benchmark client do), driven by Boost.Asio on one I/O thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "absl/status/statusor.h"
#include "client/bench/runner.h"

namespace tessera::bench {

struct HttpTarget {
  std::string host;
  std::string port;
  std::string base_path;  // e.g. "" or "/v1" stripped: requests go to base_path + /v1/...
  std::string api_key;    // sent as "Authorization: Bearer KEY"; empty: none
};

// Parses http://HOST[:PORT][/PATH] (the default port is 80).
absl::StatusOr<HttpTarget> ParseBaseUrl(const std::string& url);

// What /v1/models says of the served model.
struct OpenAiModel {
  std::string id;
  int64_t vocab_size = 0;      // from llama.cpp's / Tessera's meta.n_vocab; 0 if unknown
  int64_t context_length = 0;  // max_model_len or meta.n_ctx_train; 0 if unknown
};

// GET /v1/models, blocking.
absl::StatusOr<OpenAiModel> FetchOpenAiModel(const HttpTarget& target);

// Idle kept-alive connections, most recent first. Used on the client's I/O
// thread only.
class ConnectionPool {
 public:
  std::optional<boost::asio::ip::tcp::socket> Take();
  void Put(boost::asio::ip::tcp::socket socket);

 private:
  static constexpr size_t kMaxIdle = 4096;
  std::vector<boost::asio::ip::tcp::socket> idle_;
};

class OpenAiClient {
 public:
  OpenAiClient(HttpTarget target, std::string model, bool chat);
  ~OpenAiClient();

  // A launcher for the Runner; valid while this client lives.
  CallLauncher Launcher();
  // Opens up to `n` connections for the calls to come, as the gRPC backend's
  // channel is connected before a run starts; stops at the first failure.
  void Preconnect(int n);

 private:
  HttpTarget target_;
  std::string model_;
  bool chat_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::ip::tcp::resolver::results_type endpoints_;
  ConnectionPool pool_;  // before thread_: the I/O thread uses it until joined
  std::thread thread_;
};

}  // namespace tessera::bench
