// Request validation and conversion, without a server.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/convert.h"
#include "server/status.h"
#include "server/validation.h"

namespace tessera::server {
namespace {

const ModelLimits kLimits{512, 2048};

v1::GenerateRequest Valid() {
  v1::GenerateRequest request;
  request.set_text("hello");
  return request;
}

TEST(ValidationTest, MinimalRequestIsValidWithDefaults) {
  EXPECT_TRUE(ValidateGenerateRequest(Valid(), kLimits).ok());
  EXPECT_EQ(EffectiveMaxTokens(Valid()), 16);
}

TEST(ValidationTest, MessagesNameTheField) {
  v1::GenerateRequest request = Valid();
  request.mutable_sampling()->set_temperature(std::numeric_limits<float>::quiet_NaN());
  absl::Status status = ValidateGenerateRequest(request, kLimits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("sampling.temperature"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("nan"), absl::string_view::npos) << status;
}

TEST(ValidationTest, PromptLengthCountsAgainstTheContext) {
  std::vector<int32_t> ids(2000, 7);
  EXPECT_TRUE(ValidatePrompt(ids, 48, kLimits).ok());
  EXPECT_EQ(ValidatePrompt(ids, 49, kLimits).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePrompt({}, 1, kLimits).code(), absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> bad = {1, 512};
  EXPECT_EQ(ValidatePrompt(bad, 1, kLimits).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidationTest, TokenizeAndDetokenizeLimits) {
  v1::TokenizeRequest tokenize;
  tokenize.set_text("fine");
  EXPECT_TRUE(ValidateTokenizeRequest(tokenize).ok());
  tokenize.set_text("\xed\xa0\x80");  // a UTF-16 surrogate
  EXPECT_FALSE(ValidateTokenizeRequest(tokenize).ok());
  v1::DetokenizeRequest detokenize;
  detokenize.add_token_ids(511);
  EXPECT_TRUE(ValidateDetokenizeRequest(detokenize, kLimits).ok());
  detokenize.add_token_ids(512);
  EXPECT_FALSE(ValidateDetokenizeRequest(detokenize, kLimits).ok());
}

TEST(ConvertTest, LossyUtf8ReplacesOnlyInvalidBytes) {
  EXPECT_EQ(ToLossyUtf8("plain"), "plain");
  EXPECT_EQ(ToLossyUtf8("a\xff"
                        "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ToLossyUtf8("\xe2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(ToLossyUtf8("\xe2\x82\xac"), "\xe2\x82\xac");  // the euro sign
}

TEST(ConvertTest, FinishStatusFollowsTheReason) {
  FinishEvent event;
  event.reason = FinishReason::kLength;
  EXPECT_TRUE(FinishStatus(event, std::nullopt).ok());
  event.reason = FinishReason::kCancelled;
  EXPECT_TRUE(FinishStatus(event, std::nullopt).ok());  // server shutdown
  grpc::Status cancelled(grpc::StatusCode::CANCELLED, "x");
  EXPECT_EQ(FinishStatus(event, cancelled).error_code(), grpc::StatusCode::CANCELLED);
  event.reason = FinishReason::kDeadline;
  EXPECT_EQ(FinishStatus(event, std::nullopt).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  event.reason = FinishReason::kError;
  event.status = absl::InternalError("boom");
  grpc::Status error = FinishStatus(event, std::nullopt);
  EXPECT_EQ(error.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(error.error_message(), "boom");
  EXPECT_EQ(ToProtoFinishReason(FinishReason::kEos), v1::FINISH_REASON_EOS);
  EXPECT_EQ(ToProtoFinishReason(FinishReason::kStop), v1::FINISH_REASON_STOP);
}

// gRPC's deadline timer can fire a little before the deadline as the
// realtime clock reads it, and a server that read the call late holds a later
// deadline than the client: within kDeadlineSlack that is still a
// deadline, not a client cancel.
TEST(ConvertTest, CancelStatusTellsDeadlinesFromClientCancels) {
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(CancelStatus(now - std::chrono::seconds(1), now).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(CancelStatus(now, now).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(CancelStatus(now + std::chrono::milliseconds(2), now).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(CancelStatus(now + kDeadlineSlack, now).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(CancelStatus(now + kDeadlineSlack + std::chrono::milliseconds(1), now)
                .error_code(),
            grpc::StatusCode::CANCELLED);
  EXPECT_EQ(CancelStatus(now + std::chrono::seconds(5), now).error_code(),
            grpc::StatusCode::CANCELLED);
  EXPECT_EQ(CancelStatus(std::chrono::system_clock::time_point::max(), now).error_code(),
            grpc::StatusCode::CANCELLED);
}

// A call gone before its request was read: its deadline tells a deadline
// from a client cancel; a call still there keeps its own status.
TEST(ConvertTest, CallsGoneBeforeTheirRequestTellDeadlinesFromCancels) {
  const auto now = std::chrono::system_clock::now();
  const absl::Status bad = absl::InvalidArgumentError("empty prompt");
  EXPECT_EQ(CancelledIfGone(true, now - std::chrono::seconds(1), now, bad).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(CancelledIfGone(true, now + std::chrono::seconds(5), now, bad).code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(CancelledIfGone(true, std::chrono::system_clock::time_point::max(), now, bad).code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(CancelledIfGone(false, now - std::chrono::seconds(1), now, bad).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CancelledIfGone(true, now - std::chrono::seconds(1), now, absl::OkStatus()).ok());
  EXPECT_EQ(CancelledIfGone(true, now + std::chrono::seconds(5), now,
                            absl::DeadlineExceededError("late")).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(StatusTest, CodesMapOneToOne) {
  EXPECT_EQ(ToGrpcCode(absl::StatusCode::kResourceExhausted), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToGrpcCode(absl::StatusCode::kUnavailable), grpc::StatusCode::UNAVAILABLE);
  grpc::Status status = ToGrpcStatus(absl::InvalidArgumentError("bad"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "bad");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
}

TEST(ValidationTest, PriorityRange) {
  v1::GenerateRequest request = Valid();
  for (int32_t ok : {-kMaxAbsPriority, -1, 0, 7, kMaxAbsPriority}) {
    request.set_priority(ok);
    EXPECT_TRUE(ValidateGenerateRequest(request, kLimits).ok()) << ok;
  }
  for (int32_t bad : {-kMaxAbsPriority - 1, kMaxAbsPriority + 1,
                      std::numeric_limits<int32_t>::min()}) {
    request.set_priority(bad);
    absl::Status status = ValidateGenerateRequest(request, kLimits);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("priority"), absl::string_view::npos) << status;
  }
}

TEST(ConvertTest, TokenIdPromptAndRandomSeed) {
  v1::GenerateRequest request = Valid();
  request.mutable_token_ids()->add_ids(1);
  request.mutable_token_ids()->add_ids(5);
  ASSERT_TRUE(ValidateGenerateRequest(request, kLimits).ok());
  EXPECT_EQ(EffectiveMaxTokens(request), 16);
  EXPECT_NE(RandomSeed(), RandomSeed());
}

}  // namespace
}  // namespace tessera::server
