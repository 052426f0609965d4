// The HTTP front's request parsing and response shaping, without a server:
// strict JSON, OpenAI fields to the gRPC request, error objects, and the
// SSE chunks of a streamed completion.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "server/http/errors.h"
#include "server/http/generation.h"
#include "server/http/json_body.h"
#include "server/http/openai_request.h"

namespace tessera::server::http {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

TEST(JsonBodyTest, AcceptsStrictJson) {
  absl::StatusOr<json> parsed = ParseJsonBody(R"({"a": [1, {"b": "c"}], "d": null})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)["a"][1]["b"], "c");
}

TEST(JsonBodyTest, RefusesDuplicatesDepthAndNonJson) {
  EXPECT_THAT(ParseJsonBody(R"({"a": 1, "a": 2})").status().message(), HasSubstr("duplicate key"));
  EXPECT_THAT(ParseJsonBody(R"({"x": {"a": 1, "a": 2}})").status().message(),
              HasSubstr("duplicate key"));
  // The same key in sibling objects is fine.
  EXPECT_TRUE(ParseJsonBody(R"([{"a": 1}, {"a": 2}])").ok());
  EXPECT_THAT(ParseJsonBody(std::string(100, '[') + std::string(100, ']')).status().message(),
              HasSubstr("deeper"));
  EXPECT_TRUE(ParseJsonBody(std::string(60, '[') + std::string(60, ']')).ok());
  for (const char* bad : {"", "{", "NaN", "[Infinity]", "{\"a\": 1} x", "\"\xff\"", "// c\n1"}) {
    EXPECT_EQ(ParseJsonBody(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(OpenAiRequestTest, CompletionFieldsReachTheGrpcRequest) {
  json body = json::parse(R"({"model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5,
      "top_p": 0.9, "top_k": 40, "min_p": 0.1, "repetition_penalty": 1.1, "presence_penalty": 0.2,
      "frequency_penalty": -0.3, "seed": 42, "stop": "x", "n": 3, "stream": true,
      "stream_options": {"include_usage": true}, "logprobs": 2, "user": "u", "ignore_eos": true,
      "priority": -3, "unknown": {"anything": [1]}})");
  absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->proto.text(), "hi");
  EXPECT_EQ(r->proto.stopping().max_tokens(), 7);
  EXPECT_FLOAT_EQ(r->proto.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(r->proto.sampling().top_p(), 0.9f);
  EXPECT_EQ(r->proto.sampling().top_k(), 40);
  EXPECT_FLOAT_EQ(r->proto.sampling().min_p(), 0.1f);
  EXPECT_FLOAT_EQ(r->proto.sampling().repetition_penalty(), 1.1f);
  EXPECT_FLOAT_EQ(r->proto.sampling().presence_penalty(), 0.2f);
  EXPECT_FLOAT_EQ(r->proto.sampling().frequency_penalty(), -0.3f);
  EXPECT_EQ(r->proto.sampling().seed(), 42u);
  ASSERT_EQ(r->proto.stopping().stop_size(), 1);
  EXPECT_EQ(r->proto.stopping().stop(0), "x");
  EXPECT_TRUE(r->proto.stopping().ignore_eos());
  EXPECT_EQ(r->n, 3);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_TRUE(r->proto.logprobs());
  EXPECT_EQ(r->proto.top_logprobs(), 2);
  EXPECT_EQ(r->proto.request_id(), "u");
  EXPECT_EQ(r->proto.priority(), -3);
}

TEST(OpenAiRequestTest, TokenIdPromptsAndNulls) {
  absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(
      json::parse(R"({"model": "m", "prompt": [[5, 6, 7]], "temperature": null, "stop": null})"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->proto.token_ids().ids_size(), 3);
  EXPECT_EQ(r->proto.token_ids().ids(2), 7);
  EXPECT_FALSE(r->proto.sampling().has_temperature());
  EXPECT_FALSE(r->max_tokens_set);
}

TEST(OpenAiRequestTest, ChatPrefersMaxCompletionTokens) {
  absl::StatusOr<OpenAiRequest> r = ParseChatRequest(json::parse(
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
          "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 4})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->proto.stopping().max_tokens(), 9);
  EXPECT_EQ(r->proto.top_logprobs(), 4);
  EXPECT_EQ(r->proto.priority(), 0);  // not given
  EXPECT_TRUE(r->add_generation_prompt);
  EXPECT_EQ(r->messages.size(), 1u);
}

// Message content is text, null or content parts, as in OpenAI's API,
// whatever the served template would make of other values.
TEST(OpenAiRequestTest, ChatContentIsTextNullOrParts) {
  for (const char* content : {R"("hi")", "null", R"([{"type": "text", "text": "hi"}])", "[]"}) {
    const std::string body = absl::StrCat(R"({"model": "m", "messages": [{"role": "user", "content": )",
                                          content, "}]}");
    EXPECT_TRUE(ParseChatRequest(json::parse(body)).ok()) << body;
  }
  for (const char* content : {"12", "true", R"({"text": "hi"})", R"(["hi"])", R"([{"type": "text"}, 3])"}) {
    const std::string body = absl::StrCat(R"({"model": "m", "messages": [{"role": "user", "content": )",
                                          content, "}]}");
    absl::StatusOr<OpenAiRequest> r = ParseChatRequest(json::parse(body));
    ASSERT_FALSE(r.ok()) << body;
    HttpError error = ErrorFromStatus(r.status());
    EXPECT_EQ(error.status, 400) << body;
    EXPECT_EQ(error.param, "messages") << body;
  }
}

TEST(OpenAiRequestTest, WrongTypesNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "m", "prompt": "a", "temperature": "1"})", "temperature"},
      {R"({"model": "m", "prompt": "a", "max_tokens": 1.5})", "max_tokens"},
      {R"({"model": "m", "prompt": "a", "max_tokens": 0})", "max_tokens"},
      {R"({"model": "m", "prompt": "a", "n": 17})", "n"},
      {R"({"model": "m", "prompt": "a", "stop": [1]})", "stop"},
      {R"({"model": "m", "prompt": "a", "stream": 1})", "stream"},
      {R"({"model": 1, "prompt": "a"})", "model"},
      {R"({"prompt": "a"})", "model"},
      {R"({"model": "m"})", "prompt"},
      {R"({"model": "m", "prompt": ["a", "b"]})", "prompt"},
      {R"({"model": "m", "prompt": "a", "priority": "high"})", "priority"},
      {R"({"model": "m", "prompt": "a", "priority": 1.5})", "priority"},
      {R"({"model": "m", "prompt": "a", "priority": 1e12})", "priority"},
  };
  for (const auto& [body, param] : cases) {
    absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(json::parse(body));
    ASSERT_FALSE(r.ok()) << body;
    HttpError error = ErrorFromStatus(r.status());
    EXPECT_EQ(error.status, 400) << body;
    EXPECT_EQ(error.param, param) << body;
    EXPECT_EQ(error.type, "invalid_request_error");
  }
}

TEST(ErrorsTest, StatusesAndValidationNames) {
  EXPECT_EQ(ErrorFromStatus(absl::ResourceExhaustedError("full")).status, 429);
  EXPECT_EQ(ErrorFromStatus(absl::UnavailableError("draining")).status, 503);
  EXPECT_EQ(ErrorFromStatus(absl::NotFoundError("model")).status, 404);
  HttpError error = ErrorFromStatus(
      absl::InvalidArgumentError("sampling.temperature must be finite and in [0, 100], got nan"));
  EXPECT_EQ(error.param, "temperature");
  EXPECT_EQ(error.message, "temperature must be finite and in [0, 100], got nan");
  EXPECT_EQ(ErrorFromStatus(absl::InvalidArgumentError(
                                "priority must be in [-1000000, 1000000], got 1000000000"))
                .param,
            "priority");
  json body = json::parse(ErrorBody(MakeError(413, "too large", "request_too_large")));
  EXPECT_EQ(body["error"]["message"], "too large");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["code"], "request_too_large");
  EXPECT_TRUE(body["error"]["param"].is_null());
}

// The `data:` payloads of an SSE byte string.
std::vector<std::string> Events(const std::string& sse) {
  std::vector<std::string> events;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    size_t end = sse.find("\n\n", pos);
    events.push_back(sse.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return events;
}

TEST(GenerationTest, StreamedChatChunks) {
  ResponseMeta meta{Endpoint::kChat, "chatcmpl-1", 1700000000, "m", true};
  Generation generation(meta, 1, /*include_usage=*/true, /*logprobs=*/false, nullptr);
  std::vector<std::string> events = Events(generation.StreamStart());
  ChoiceEvent tokens;
  tokens.tokens.text = "Hello";
  tokens.tokens.tokens.resize(1);
  for (const std::string& e : Events(generation.OnEvent(tokens))) events.push_back(e);
  ChoiceEvent finish;
  finish.finished = true;
  finish.finish.reason = FinishReason::kLength;
  finish.finish.text = "!";
  finish.finish.prompt_tokens = 3;
  finish.finish.completion_tokens = 2;
  for (const std::string& e : Events(generation.OnEvent(finish))) events.push_back(e);
  ASSERT_EQ(events.size(), 5u);
  json role = json::parse(events[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(json::parse(events[1])["choices"][0]["delta"]["content"], "Hello");
  EXPECT_TRUE(json::parse(events[1])["usage"].is_null());
  json last = json::parse(events[2]);
  EXPECT_EQ(last["choices"][0]["delta"]["content"], "!");
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  json usage = json::parse(events[3]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 5);
  EXPECT_EQ(events[4], "[DONE]");
  EXPECT_TRUE(generation.done());
}

TEST(GenerationTest, UnstreamedCompletionWithTwoChoices) {
  ResponseMeta meta{Endpoint::kCompletions, "cmpl-1", 1700000000, "m", false};
  Generation generation(meta, 2, false, false, nullptr);
  for (int i : {1, 0}) {
    ChoiceEvent finish;
    finish.index = i;
    finish.finished = true;
    finish.finish.reason = i == 0 ? FinishReason::kEos : FinishReason::kStop;
    finish.finish.text = i == 0 ? "a" : "b";
    finish.finish.prompt_tokens = 4;
    finish.finish.completion_tokens = 1;
    EXPECT_EQ(generation.OnEvent(finish), "");
  }
  ASSERT_TRUE(generation.done());
  json body = json::parse(generation.FinalBody());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "a");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][1]["text"], "b");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(body["usage"]["completion_tokens"], 2);
}

}  // namespace
}  // namespace tessera::server::http
