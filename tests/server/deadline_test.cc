// A deadline the server enforces ends the call as DEADLINE_EXCEEDED, and the
// metrics book it under that code, never as a client cancel.
#include <chrono>
#include <memory>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "server/convert.h"
#include "tests/server/test_util.h"

namespace tessera::server {
namespace {

using namespace std::chrono_literals;

// The value of tessera_request_failure_total{code="CODE"} in a scrape, or 0.
double FailureCount(const std::string& scrape, const std::string& code) {
  const std::regex line("tessera_request_failure_total\\{code=\"" + code + "\"\\} ([0-9.e+]+)");
  std::smatch m;
  return std::regex_search(scrape, m, line) ? std::stod(m[1]) : 0.0;
}

TEST(DeadlineTest, ServerEnforcedDeadlinesAreCountedAsDeadlines) {
  ServerOptions options = testing::TestOptions();
  options.engine.model_path = testing::SlowModelPath();
  options.engine.kv_cache_bytes = int64_t{256} << 20;
  options.metrics_port = kAnyFreePort;
  std::unique_ptr<Server> server = testing::StartServer(options);
  ASSERT_NE(server->engine(), nullptr);
  std::shared_ptr<grpc::Channel> channel = testing::Connect(server->port());
  // A call's deadline must not be spent on connecting: a call that times out
  // on the client before it reaches the server is none of the server's.
  ASSERT_TRUE(channel->WaitForConnected(testing::In(std::chrono::seconds(30))));
  auto stub = v1::Inference::NewStub(channel);
  v1::GenerateRequest request = testing::TextRequest("Once upon a time", 4000);
  request.mutable_stopping()->set_ignore_eos(true);

  constexpr int kCalls = 12;
  for (int i = 0; i < kCalls; ++i) {
    // Deadlines of different lengths land at different points of a step.
    // They are longer than kDeadlineSlack, so a call that the server
    // reads on time is not booked as a deadline merely for being short.
    testing::StreamResult result =
        testing::Generate(*stub, request, kDeadlineSlack + 60ms + 13ms * i);
    EXPECT_EQ(result.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    ASSERT_TRUE(testing::WaitEngineIdle(*stub));
  }
  std::optional<std::string> scrape = testing::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(scrape.has_value());
  EXPECT_EQ(FailureCount(*scrape, "DEADLINE_EXCEEDED"), kCalls) << *scrape;
  EXPECT_EQ(FailureCount(*scrape, "CANCELLED"), 0) << *scrape;
}

}  // namespace
}  // namespace tessera::server
