// Server lifecycle: health across loading and draining, the request queue
// limit, drain with a request in flight, and the /metrics endpoint.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/test_util.h"

namespace tessera::server {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using testing::Connect;
using testing::kNotServing;
using testing::kServing;
using testing::TextRequest;

constexpr char kServiceName[] = "tessera.v1.Inference";

v1::GenerateRequest LongRequest(int max_tokens) {
  v1::GenerateRequest request = TextRequest("Once upon a time", max_tokens);
  request.mutable_stopping()->set_ignore_eos(true);
  return request;
}

TEST(LifecycleTest, HealthFollowsLoadingAndDraining) {
  std::unique_ptr<Server> server = testing::StartServer(testing::TestOptions(), /*load=*/false);
  auto channel = Connect(server->port());
  auto stub = v1::Inference::NewStub(channel);
  EXPECT_EQ(testing::HealthStatus(channel, ""), kNotServing);
  EXPECT_EQ(testing::HealthStatus(channel, kServiceName), kNotServing);

  // While loading, inference calls are refused.
  v1::CompleteResponse response;
  EXPECT_EQ(testing::Complete(*stub, TextRequest("Hi", 4), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext info_context;
  v1::GetModelInfoResponse info;
  EXPECT_EQ(stub->GetModelInfo(&info_context, {}, &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  ASSERT_TRUE(server->LoadModel().ok());
  EXPECT_EQ(testing::HealthStatus(channel, ""), kServing);
  EXPECT_EQ(testing::HealthStatus(channel, kServiceName), kServing);
  EXPECT_TRUE(testing::Complete(*stub, TextRequest("Hi", 4), &response).ok());

  server->BeginDrain();
  EXPECT_EQ(testing::HealthStatus(channel, ""), kNotServing);
  EXPECT_EQ(testing::HealthStatus(channel, kServiceName), kNotServing);
  EXPECT_EQ(testing::Complete(*stub, TextRequest("Hi", 4), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(server->Drain(5s));
}

// A server whose engine fails step after step (as on a device fault) turns
// health NOT_SERVING for good and refuses new work with UNAVAILABLE.
TEST(LifecycleTest, RepeatedEngineFailuresTurnHealthNotServing) {
  ServerOptions options = testing::TestOptions();
  options.engine.max_consecutive_failed_steps = 2;
  options.engine.fail_first_steps_for_testing = 1000;
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto channel = Connect(server->port());
  auto stub = v1::Inference::NewStub(channel);
  EXPECT_EQ(testing::HealthStatus(channel, ""), kServing);
  v1::CompleteResponse response;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(testing::Complete(*stub, TextRequest("Hi", 4), &response).error_code(),
              grpc::StatusCode::INTERNAL);
  }
  // The stats poll (every 250 ms) carries the engine's health to the server.
  for (int i = 0; i < 400 && testing::HealthStatus(channel, "") != kNotServing; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(testing::HealthStatus(channel, ""), kNotServing);
  EXPECT_EQ(testing::HealthStatus(channel, kServiceName), kNotServing);
  EXPECT_EQ(testing::Complete(*stub, TextRequest("Hi", 4), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  server->Shutdown();
}

// Waits until the engine reports `waiting` queued requests.
bool WaitForWaiting(v1::Inference::Stub& stub, int waiting) {
  for (int i = 0; i < 1000; ++i) {
    grpc::ClientContext context;
    v1::GetModelInfoResponse info;
    if (stub.GetModelInfo(&context, {}, &info).ok() && info.requests_waiting() >= waiting) {
      return true;
    }
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(LifecycleTest, FullQueueGivesResourceExhausted) {
  ServerOptions options = testing::TestOptions();
  options.engine.max_queued_requests = 1;
  options.engine.max_num_seqs = 1;
  // A model slow enough that the running request cannot finish before the
  // third one arrives, however loaded the machine is.
  options.engine.model_path = testing::SlowModelPath();
  options.engine.kv_cache_bytes = int64_t{256} << 20;
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto stub = v1::Inference::NewStub(Connect(server->port()));

  // One request runs (it has produced a message), one waits in the queue.
  grpc::ClientContext running_context, waiting_context;
  auto running = stub->Generate(&running_context, LongRequest(8000));
  v1::GenerateResponse message;
  ASSERT_TRUE(running->Read(&message));
  auto waiting = stub->Generate(&waiting_context, LongRequest(8000));
  ASSERT_TRUE(WaitForWaiting(*stub, 1));

  v1::CompleteResponse response;
  grpc::Status status = testing::Complete(*stub, LongRequest(16), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();

  running_context.TryCancel();
  waiting_context.TryCancel();
  while (running->Read(&message)) {
  }
  while (waiting->Read(&message)) {
  }
  EXPECT_EQ(running->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(waiting->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(testing::WaitEngineIdle(*stub));
  // With room again, requests are accepted.
  EXPECT_TRUE(testing::Complete(*stub, LongRequest(16), &response).ok());
}

TEST(LifecycleTest, DrainLetsTheRequestInFlightFinish) {
  std::unique_ptr<Server> server = testing::StartServer();
  auto channel = Connect(server->port());
  auto stub = v1::Inference::NewStub(channel);

  grpc::ClientContext context;
  context.set_deadline(testing::In(30s));
  constexpr int kTokens = 1500;
  auto reader = stub->Generate(&context, LongRequest(kTokens));
  v1::GenerateResponse message;
  ASSERT_TRUE(reader->Read(&message));
  int tokens = message.token_ids_size();

  std::future<bool> drained = std::async(std::launch::async, [&] { return server->Drain(20s); });
  // Draining has begun once health says so; new requests are refused.
  for (int i = 0; i < 500 && testing::HealthStatus(channel, "") != kNotServing; ++i) {
    std::this_thread::sleep_for(2ms);
  }
  v1::CompleteResponse refused;
  EXPECT_EQ(testing::Complete(*stub, TextRequest("Hi", 4), &refused).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&message)) {
    tokens += message.token_ids_size();
    reason = message.finish_reason();
  }
  grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, kTokens);
  EXPECT_EQ(reason, v1::FINISH_REASON_LENGTH);
  EXPECT_TRUE(drained.get());
}

// At the drain deadline, a stream still running ends with a last message
// (FINISH_REASON_CANCELLED) and an OK status, not a cut with UNAVAILABLE.
TEST(LifecycleTest, DrainDeadlineEndsStreamsWithALastMessage) {
  ServerOptions options = testing::TestOptions();
  options.engine.model_path = testing::SlowModelPath();
  options.engine.kv_cache_bytes = int64_t{256} << 20;
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto stub = v1::Inference::NewStub(Connect(server->port()));
  grpc::ClientContext context;
  context.set_deadline(testing::In(60s));
  auto reader = stub->Generate(&context, LongRequest(4000));
  v1::GenerateResponse message;
  ASSERT_TRUE(reader->Read(&message));
  const auto start = std::chrono::steady_clock::now();
  std::future<bool> drained = std::async(std::launch::async, [&] { return server->Drain(300ms); });
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&message)) reason = message.finish_reason();
  grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(reason, v1::FINISH_REASON_CANCELLED);
  EXPECT_FALSE(drained.get());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// An idle server exits at once, whatever connections are open.
TEST(LifecycleTest, IdleServerWithOpenConnectionDrainsQuickly) {
  std::unique_ptr<Server> server = testing::StartServer();
  auto channel = Connect(server->port());
  auto stub = v1::Inference::NewStub(channel);
  ASSERT_TRUE(testing::WaitEngineIdle(*stub));  // the connection is up and idle
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(server->Drain(20s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

// The value of an unlabelled sample `name` in a Prometheus text scrape.
double SampleValue(const std::string& scrape, const std::string& name) {
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::strtod(line.c_str() + name.size() + 1, nullptr);
  }
  return -1;
}

// --metrics-host (like --host) may be a host name, not only an address.
TEST(LifecycleTest, MetricsHostMayBeAHostName) {
  ServerOptions options = testing::TestOptions();
  options.metrics_port = kAnyFreePort;
  options.metrics_host = "localhost";
  std::unique_ptr<Server> server = testing::StartServer(options, /*load=*/false);
  ASSERT_GT(server->metrics_port(), 0);
  std::optional<std::string> scrape = testing::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(scrape.has_value());
  EXPECT_THAT(*scrape, HasSubstr("tessera_requests_running"));
}

TEST(LifecycleTest, MetricsAreScrapedAndValid) {
  ServerOptions options = testing::TestOptions();
  options.metrics_port = kAnyFreePort;
  std::unique_ptr<Server> server = testing::StartServer(options);
  ASSERT_GT(server->metrics_port(), 0);
  auto stub = v1::Inference::NewStub(Connect(server->port()));
  v1::CompleteResponse response;
  ASSERT_TRUE(testing::Complete(*stub, TextRequest("Once upon a time", 16), &response).ok());
  EXPECT_EQ(testing::Complete(*stub, TextRequest("", 16), &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  std::optional<std::string> scrape = testing::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(scrape.has_value());
  // The engine records a step just after it hands out the step's tokens,
  // so the last step's record may land after the reply: scrape until the
  // 15 decode steps (the tokens after the first) are in.
  const std::string decode_count = "tessera_engine_step_duration_seconds_count{kind=\"decode\"}";
  for (int i = 0; i < 250 && SampleValue(*scrape, decode_count) < 15; ++i) {
    std::this_thread::sleep_for(20ms);
    scrape = testing::HttpGet(server->metrics_port(), "/metrics");
    ASSERT_TRUE(scrape.has_value());
  }
  EXPECT_THAT(*scrape, HasSubstr("tessera_request_success_total{finish_reason=\"length\"} 1"));
  EXPECT_THAT(*scrape, HasSubstr("tessera_request_failure_total{code=\"INVALID_ARGUMENT\"} 1"));
  EXPECT_THAT(*scrape, HasSubstr("tessera_time_to_first_token_seconds_bucket"));
  EXPECT_THAT(*scrape, HasSubstr("tessera_inter_token_latency_seconds_bucket"));
  EXPECT_THAT(*scrape, HasSubstr("tessera_batch_size_bucket"));
  EXPECT_THAT(*scrape, HasSubstr("tessera_kv_cache_usage_ratio"));
  EXPECT_GE(SampleValue(*scrape, "tessera_prompt_tokens_total"), 5);
  EXPECT_GE(SampleValue(*scrape, "tessera_generation_tokens_total"), 16);
  EXPECT_GE(SampleValue(*scrape, "tessera_e2e_request_latency_seconds_count"), 1);
  EXPECT_GE(SampleValue(*scrape, "tessera_iteration_tokens_count"), 1);
  // Every step is timed once, as prefill (the prompt) or decode.
  const double prefill_steps =
      SampleValue(*scrape, "tessera_engine_step_duration_seconds_count{kind=\"prefill\"}");
  const double decode_steps = SampleValue(*scrape, decode_count);
  EXPECT_GE(prefill_steps, 1);
  EXPECT_GE(decode_steps, 15);
  EXPECT_EQ(prefill_steps + decode_steps, SampleValue(*scrape, "tessera_iteration_tokens_count"));
  EXPECT_GT(SampleValue(*scrape, "tessera_engine_step_duration_seconds_sum{kind=\"decode\"}"), 0);

  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not on PATH; skipping the format check";
  }
  const std::string path = ::testing::TempDir() + "/tessera_scrape.txt";
  std::ofstream(path) << *scrape;
  const std::string command = "promtool check metrics < " + path;
  EXPECT_EQ(std::system(command.c_str()), 0) << *scrape;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tessera::server
