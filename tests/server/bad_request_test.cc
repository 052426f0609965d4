// Invalid requests get the right status code and leave the server serving.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "server/convert.h"
#include "tests/server/test_util.h"

namespace tessera::server {
namespace {

using testing::Connect;
using testing::TextRequest;

struct BadCase {
  std::string name;
  std::function<void(v1::GenerateRequest&)> mutate;
  grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT;
};

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<BadCase> BadCases() {
  using R = v1::GenerateRequest;
  return {
      {"nan_temperature", [](R& r) { r.mutable_sampling()->set_temperature(kNan); }},
      {"inf_temperature", [](R& r) { r.mutable_sampling()->set_temperature(kInf); }},
      {"negative_temperature", [](R& r) { r.mutable_sampling()->set_temperature(-0.5f); }},
      {"temperature_above_100", [](R& r) { r.mutable_sampling()->set_temperature(100.5f); }},
      {"out_of_vocab_token_id", [](R& r) { r.mutable_token_ids()->add_ids(512); }},
      {"negative_token_id",
       [](R& r) {
         r.mutable_token_ids()->add_ids(1);
         r.mutable_token_ids()->add_ids(-3);
       }},
      {"empty_text", [](R& r) { r.set_text(""); }},
      {"empty_token_ids", [](R& r) { r.mutable_token_ids(); }},
      {"no_prompt", [](R& r) { r.clear_prompt(); }},
      {"invalid_utf8_text", [](R& r) { r.set_text("abc\xff\xfe"); }},
      {"overlong_utf8_text", [](R& r) { r.set_text("\xc0\xaf"); }},
      {"text_over_1mib", [](R& r) { r.set_text(std::string((1 << 20) + 1, 'a')); }},
      {"max_tokens_zero", [](R& r) { r.mutable_stopping()->set_max_tokens(0); }},
      {"max_tokens_beyond_context", [](R& r) { r.mutable_stopping()->set_max_tokens(2048); }},
      {"prompt_beyond_context",
       [](R& r) {
         for (int i = 0; i < 2049; ++i) r.mutable_token_ids()->add_ids(100);
         r.mutable_stopping()->set_max_tokens(1);
       }},
      {"top_p_zero", [](R& r) { r.mutable_sampling()->set_top_p(0.0f); }},
      {"top_p_above_one", [](R& r) { r.mutable_sampling()->set_top_p(1.5f); }},
      {"top_p_nan", [](R& r) { r.mutable_sampling()->set_top_p(kNan); }},
      {"min_p_nan", [](R& r) { r.mutable_sampling()->set_min_p(kNan); }},
      {"min_p_above_one", [](R& r) { r.mutable_sampling()->set_min_p(1.5f); }},
      {"top_k_negative", [](R& r) { r.mutable_sampling()->set_top_k(-1); }},
      {"top_k_above_vocab", [](R& r) { r.mutable_sampling()->set_top_k(513); }},
      {"repetition_penalty_zero", [](R& r) { r.mutable_sampling()->set_repetition_penalty(0.0f); }},
      {"repetition_penalty_above_10",
       [](R& r) { r.mutable_sampling()->set_repetition_penalty(10.5f); }},
      {"presence_penalty_inf", [](R& r) { r.mutable_sampling()->set_presence_penalty(kInf); }},
      {"frequency_penalty_below_minus_2",
       [](R& r) { r.mutable_sampling()->set_frequency_penalty(-2.5f); }},
      {"top_logprobs_21", [](R& r) { r.set_top_logprobs(21); }},
      {"top_logprobs_negative", [](R& r) { r.set_top_logprobs(-1); }},
      {"too_many_stop_strings",
       [](R& r) {
         for (int i = 0; i < 9; ++i) r.mutable_stopping()->add_stop(absl::StrCat("stop", i));
       }},
      {"empty_stop_string", [](R& r) { r.mutable_stopping()->add_stop(""); }},
      {"stop_string_over_256_bytes",
       [](R& r) { r.mutable_stopping()->add_stop(std::string(257, 'x')); }},
      {"invalid_utf8_stop_string", [](R& r) { r.mutable_stopping()->add_stop("\xe2\x82"); }},
      {"too_many_stop_token_ids",
       [](R& r) {
         for (int i = 0; i < 33; ++i) r.mutable_stopping()->add_stop_token_ids(i);
       }},
      {"stop_token_id_out_of_vocab", [](R& r) { r.mutable_stopping()->add_stop_token_ids(600); }},
      {"request_id_over_128_bytes", [](R& r) { r.set_request_id(std::string(129, 'r')); }},
      {"invalid_utf8_request_id", [](R& r) { r.set_request_id("\xff"); }},
  };
}

class BadRequestTest : public testing::SharedServerTest {
 protected:
  void ExpectServesGoodRequest() {
    v1::CompleteResponse response;
    grpc::Status status = testing::Complete(*stub_, TextRequest("Once upon a time", 8), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.usage().completion_tokens(), 8);
  }
};

TEST_F(BadRequestTest, GenerateRejectsEachBadField) {
  for (const BadCase& bad : BadCases()) {
    SCOPED_TRACE(bad.name);
    v1::GenerateRequest request = TextRequest("Once upon a time", 8);
    bad.mutate(request);
    testing::StreamResult result = testing::Generate(*stub_, request);
    EXPECT_EQ(result.status.error_code(), bad.code) << result.status.error_message();
    EXPECT_TRUE(result.messages.empty());
    EXPECT_FALSE(result.status.error_message().empty());
  }
  ExpectServesGoodRequest();
}

TEST_F(BadRequestTest, CompleteRejectsEachBadField) {
  for (const BadCase& bad : BadCases()) {
    SCOPED_TRACE(bad.name);
    v1::GenerateRequest request = TextRequest("Once upon a time", 8);
    bad.mutate(request);
    v1::CompleteResponse response;
    grpc::Status status = testing::Complete(*stub_, request, &response);
    EXPECT_EQ(status.error_code(), bad.code) << status.error_message();
  }
  ExpectServesGoodRequest();
}

TEST_F(BadRequestTest, BoundaryValuesAreAccepted) {
  v1::GenerateRequest request = TextRequest("Once upon a time", 2043);  // 5 + 2043 = 2048
  request.mutable_sampling()->set_temperature(100.0f);
  request.mutable_sampling()->set_top_p(1.0f);
  request.mutable_sampling()->set_min_p(1.0f);
  request.mutable_sampling()->set_top_k(512);
  request.mutable_sampling()->set_repetition_penalty(10.0f);
  request.mutable_sampling()->set_presence_penalty(-2.0f);
  request.mutable_sampling()->set_frequency_penalty(2.0f);
  request.set_top_logprobs(20);
  request.set_request_id(std::string(128, 'r'));
  request.mutable_stopping()->add_stop(std::string(256, 'x'));
  request.mutable_stopping()->set_ignore_eos(true);
  v1::CompleteResponse response;
  grpc::Status status = testing::Complete(*stub_, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.usage().completion_tokens(), 2043);
  EXPECT_EQ(response.logprobs_size(), 2043);
}

TEST_F(BadRequestTest, TokenizeRejectsBadText) {
  for (const std::string& text : {std::string("\xff"), std::string((1 << 20) + 1, 'a')}) {
    grpc::ClientContext context;
    v1::TokenizeRequest request;
    request.set_text(text);
    v1::TokenizeResponse response;
    EXPECT_EQ(stub_->Tokenize(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST_F(BadRequestTest, DetokenizeRejectsBadIds) {
  std::vector<std::vector<int32_t>> cases = {{1, 512}, {-1}, std::vector<int32_t>(2049, 5)};
  for (const auto& ids : cases) {
    grpc::ClientContext context;
    v1::DetokenizeRequest request;
    request.mutable_token_ids()->Add(ids.begin(), ids.end());
    v1::DetokenizeResponse response;
    EXPECT_EQ(stub_->Detokenize(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
}

// Sends `bytes` as the request of unary `method` and returns the status.
grpc::Status RawUnaryCall(int port, const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(Connect(port));
  grpc::ClientContext context;
  context.set_deadline(testing::In(std::chrono::seconds(5)));
  grpc::CompletionQueue cq;
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  auto call = stub.PrepareUnaryCall(&context, method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  return status;
}

// Bytes that are no message at all (a truncated length-delimited field) get
// INVALID_ARGUMENT with a message naming the expected type, on every method.
TEST_F(BadRequestTest, GarbageBytesAreInvalidArgumentOnEveryMethod) {
  const std::string bytes =
      "\x0a\x7f"
      "abc";
  for (const char* method : {"Complete", "Tokenize", "Detokenize", "GetModelInfo"}) {
    grpc::Status status =
        RawUnaryCall(server_->port(), std::string("/tessera.v1.Inference/") + method, bytes);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr("is not a valid tessera.v1."))
        << method;
  }
}

// Compressed requests are refused before their message is inflated (a
// small gzip bomb would otherwise cost hundreds of MiB): UNIMPLEMENTED, and
// the server serves on.
TEST_F(BadRequestTest, CompressedRequestsAreRefusedUnread) {
  for (grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    grpc::ClientContext context;
    context.set_deadline(testing::In(std::chrono::seconds(30)));
    context.set_compression_algorithm(algorithm);
    v1::CompleteResponse response;
    grpc::Status status = stub_->Complete(&context, TextRequest("Once upon a time", 4), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << algorithm << ": " << status.error_message();
  }
  ExpectServesGoodRequest();
}

// Oversized metadata fails its own call; the connection and a stream on it
// live on.
TEST_F(BadRequestTest, OversizedMetadataFailsOnlyItsCall) {
  auto channel = Connect(server_->port());
  auto stub = v1::Inference::NewStub(channel);
  grpc::ClientContext stream_context;
  stream_context.set_deadline(testing::In(std::chrono::seconds(60)));
  v1::GenerateRequest long_request = testing::TextRequest("Once upon a time", 1500);
  long_request.mutable_stopping()->set_ignore_eos(true);
  auto reader = stub->Generate(&stream_context, long_request);
  v1::GenerateResponse message;
  ASSERT_TRUE(reader->Read(&message));

  for (size_t size : {size_t{20} << 10, size_t{200} << 10, size_t{1} << 20}) {
    grpc::ClientContext context;
    context.set_deadline(testing::In(std::chrono::seconds(10)));
    context.AddMetadata("x-padding", std::string(size, 'a'));
    v1::GetModelInfoResponse info;
    grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    if (size <= kMaxRequestMetadataBytes) {
      EXPECT_TRUE(status.ok()) << size << ": " << status.error_message();
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << size << ": " << status.error_message();
    }
  }
  int tokens = message.token_ids_size();
  while (reader->Read(&message)) tokens += message.token_ids_size();
  grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tokens, 1500);
}

}  // namespace
}  // namespace tessera::server
