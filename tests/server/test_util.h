// Helpers shared by the server tests: an in-process server on loopback
// serving the bundled stories260K model, and small clients for gRPC health,
// streaming Generate and HTTP /metrics.
#pragma once

#include "testing/temp_model.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "server/options.h"
#include "server/server.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::server::testing {

inline std::string ModelPath() {
  return std::string(TESSERA_SOURCE_DIR) + "/models/stories260K.gguf";
}

// A random-weight model slow enough (a few hundred tokens/s) that a long
// request is still running whatever the machine's load; written once per
// process into the temp directory.
inline std::string SlowModelPath() {
  static const std::string path = [] {
    RandomModelSpec spec;
    spec.arch = "llama";
    spec.dim = 512;
    spec.layers = 6;
    spec.heads = 8;
    spec.ffn = 1536;
    spec.context = 8192;
    spec.vocab_size = 512;
    spec.dtype = GgmlType::kF32;
    return tessera::testing::WriteTempModel(spec, "slow");
  }();
  return path;
}

inline ServerOptions TestOptions() {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.metrics_port = 0;  // tests that scrape turn it on
  options.http_port = 0;  // the HTTP front has its own tests
  options.engine.model_path = ModelPath();
  options.engine.device = "cpu";
  options.engine.num_threads = 1;
  options.engine.kv_cache_bytes = int64_t{32} << 20;  // plenty for a few 2048-token requests
  options.drain_timeout = std::chrono::seconds(10);
  options.log_level = "warn";
  return options;
}

// A started server; the model is loaded unless `load` is false.
inline std::unique_ptr<Server> StartServer(const ServerOptions& options = TestOptions(),
                                           bool load = true) {
  auto server = std::make_unique<Server>();
  absl::Status status = server->Start(options);
  EXPECT_TRUE(status.ok()) << status;
  if (status.ok() && load) {
    status = server->LoadModel();
    EXPECT_TRUE(status.ok()) << status;
  }
  return server;
}

inline std::shared_ptr<grpc::Channel> Connect(int port) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                             grpc::InsecureChannelCredentials());
}

// A fixture whose tests share one server on the bundled model, started once
// per test suite, each test with a fresh stub.
class SharedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartServer().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Inference::NewStub(Connect(server_->port()));
  }

  static inline Server* server_ = nullptr;
  std::unique_ptr<v1::Inference::Stub> stub_;
};

inline std::chrono::system_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

// A greedy text request.
inline v1::GenerateRequest TextRequest(const std::string& text, int max_tokens) {
  v1::GenerateRequest request;
  request.set_text(text);
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_stopping()->set_max_tokens(max_tokens);
  return request;
}

struct StreamResult {
  std::vector<v1::GenerateResponse> messages;
  grpc::Status status;

  std::vector<int32_t> TokenIds() const {
    std::vector<int32_t> ids;
    for (const auto& m : messages)
      ids.insert(ids.end(), m.token_ids().begin(), m.token_ids().end());
    return ids;
  }
  std::string Text() const {
    std::string text;
    for (const auto& m : messages) text += m.text();
    return text;
  }
  int LogprobCount() const {
    int n = 0;
    for (const auto& m : messages) n += m.logprobs_size();
    return n;
  }
};

inline StreamResult Generate(v1::Inference::Stub& stub, const v1::GenerateRequest& request,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  grpc::ClientContext context;
  context.set_deadline(In(timeout));
  StreamResult result;
  auto reader = stub.Generate(&context, request);
  v1::GenerateResponse message;
  while (reader->Read(&message)) result.messages.push_back(message);
  result.status = reader->Finish();
  return result;
}

inline grpc::Status Complete(v1::Inference::Stub& stub, const v1::GenerateRequest& request,
                             v1::CompleteResponse* response,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  grpc::ClientContext context;
  context.set_deadline(In(timeout));
  return stub.Complete(&context, request, response);
}

// grpc.health.v1.Health/Check by hand (Debian ships no generated health
// stubs): HealthCheckRequest{service = 1} in, HealthCheckResponse{status = 1}
// out. Returns the ServingStatus (1 SERVING, 2 NOT_SERVING) or nullopt when
// the call fails.
inline std::optional<int> HealthStatus(const std::shared_ptr<grpc::Channel>& channel,
                                       const std::string& service) {
  std::string request;
  if (!service.empty()) {
    request.push_back('\x0a');  // field 1, length-delimited
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(5)));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request_buffer, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok || !status.ok()) return std::nullopt;
  grpc::Slice out;
  if (!response.Valid() || response.Length() == 0) return 0;  // UNKNOWN (default)
  if (!response.DumpToSingleSlice(&out).ok() || out.size() < 2 || out.begin()[0] != 0x08) {
    return std::nullopt;
  }
  return static_cast<int>(out.begin()[1]);
}

inline constexpr int kServing = 1;
inline constexpr int kNotServing = 2;

// GET http://127.0.0.1:port/path over HTTP/1.0; returns the body, or
// nullopt on a connection error.
inline std::optional<std::string> HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return std::nullopt;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string reply;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) reply.append(buffer, n);
  close(fd);
  const size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) return std::nullopt;
  if (reply.find(" 200 ") == std::string::npos) return std::nullopt;
  return reply.substr(body + 4);
}

// Polls GetModelInfo until no request is running or waiting.
inline bool WaitEngineIdle(v1::Inference::Stub& stub,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(5)));
    v1::GetModelInfoResponse info;
    if (stub.GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok() &&
        info.requests_running() == 0 && info.requests_waiting() == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace tessera::server::testing
