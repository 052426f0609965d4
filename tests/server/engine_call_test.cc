// How an engine call's end is counted when its client goes away: a stream
// whose write failed (the client was killed) before gRPC reported the cancel
// must be counted as CANCELLED, not as a success with finish_reason
// "cancelled" (the soak test found such successes among killed clients).
#include "server/engine_call.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "server/metrics.h"

namespace tessera::server {
namespace {

// The engine side of an EngineCall, driven by hand: no gRPC call behind it.
class ProbeCall : public EngineCall {
 public:
  explicit ProbeCall(Metrics* metrics) : EngineCall(nullptr, metrics) {}

  void OnTokens(TokenEvent) override {}
  void OnFinish(FinishEvent event) override {
    std::lock_guard<std::mutex> lock(mu_);
    status = FinishLocked(event);
  }
  void ClientGone() {
    std::lock_guard<std::mutex> lock(mu_);
    ClientGoneLocked();
  }
  void ClientCancelled(grpc::Status cancel) {
    std::lock_guard<std::mutex> lock(mu_);
    client_cancel_ = std::move(cancel);
  }

  grpc::Status status;
};

FinishEvent Finished(FinishReason reason) {
  FinishEvent event;
  event.reason = reason;
  event.prompt_tokens = 4;
  event.completion_tokens = 3;
  return event;
}

// The value of one sample line of /metrics, or -1 when it is missing.
double Sample(const Metrics& metrics, const std::string& series) {
  const std::string text = metrics.Scrape();
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

constexpr char kCancelledFailures[] = "tessera_request_failure_total{code=\"CANCELLED\"}";
constexpr char kCancelledSuccesses[] = "tessera_request_success_total{finish_reason=\"cancelled\"}";

TEST(EngineCallTest, BrokenStreamEndsAsCancelledFailure) {
  Metrics metrics;
  auto call = std::make_shared<ProbeCall>(&metrics);
  call->ClientGone();
  call->OnFinish(Finished(FinishReason::kCancelled));
  EXPECT_EQ(call->status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(Sample(metrics, kCancelledFailures), 1);
  EXPECT_EQ(Sample(metrics, kCancelledSuccesses), 0);
}

TEST(EngineCallTest, CancelledByTheServerAloneIsASuccess) {
  // Without a client cancel the engine cancelled on its own (shutdown): the
  // client gets a regular last message, counted as a success.
  Metrics metrics;
  auto call = std::make_shared<ProbeCall>(&metrics);
  call->OnFinish(Finished(FinishReason::kCancelled));
  EXPECT_TRUE(call->status.ok());
  EXPECT_EQ(Sample(metrics, kCancelledSuccesses), 1);
}

TEST(EngineCallTest, ACancelReportedFirstKeepsItsCode) {
  // The deadline passed (gRPC reported it), then the write failed as well.
  Metrics metrics;
  auto call = std::make_shared<ProbeCall>(&metrics);
  call->ClientCancelled(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded"));
  call->ClientGone();
  call->OnFinish(Finished(FinishReason::kCancelled));
  EXPECT_EQ(call->status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(Sample(metrics, "tessera_request_failure_total{code=\"DEADLINE_EXCEEDED\"}"), 1);
  EXPECT_EQ(Sample(metrics, kCancelledFailures), -1);
}

TEST(EngineCallTest, AStreamThatFinishedBeforeBreakingStaysASuccess) {
  // The only ambiguity left: the engine finished (the last message was on
  // its way) when the client died; the request was served.
  Metrics metrics;
  auto call = std::make_shared<ProbeCall>(&metrics);
  call->OnFinish(Finished(FinishReason::kLength));
  call->ClientGone();
  EXPECT_TRUE(call->status.ok());
  EXPECT_EQ(Sample(metrics, "tessera_request_success_total{finish_reason=\"length\"}"), 1);
}

}  // namespace
}  // namespace tessera::server
