#include "server/http/openai_response.h"

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/service.h"

namespace tessera::server::http {
namespace {

using nlohmann::json;

std::string TokenText(const Tokenizer& tokenizer, int32_t id) {
  return tokenizer.Decode(std::span<const TokenId>(&id, 1), /*strip_leading_space=*/false);
}

json Bytes(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

json ResponseObject(const ResponseMeta& meta) {
  const char* object = meta.endpoint == Endpoint::kCompletions
                           ? "text_completion"
                           : (meta.stream ? "chat.completion.chunk" : "chat.completion");
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", SystemFingerprint()}};
}

const char* FinishReasonText(FinishReason reason) {
  return reason == FinishReason::kLength ? "length" : "stop";
}

json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

void AppendCompletionLogprobs(std::span<const GeneratedToken> tokens, const Tokenizer& tokenizer,
                              int64_t* offset, json* out) {
  for (const GeneratedToken& token : tokens) {
    const std::string text = TokenText(tokenizer, token.token_id);
    (*out)["tokens"].push_back(text);
    (*out)["token_logprobs"].push_back(token.logprob);
    json top = json::object();
    for (const TokenLogprob& alt : token.top) {
      top[TokenText(tokenizer, alt.token_id)] = alt.logprob;
    }
    (*out)["top_logprobs"].push_back(std::move(top));
    (*out)["text_offset"].push_back(*offset);
    *offset += static_cast<int64_t>(text.size());
  }
}

void AppendChatLogprobs(std::span<const GeneratedToken> tokens, const Tokenizer& tokenizer,
                        json* out) {
  for (const GeneratedToken& token : tokens) {
    const std::string text = TokenText(tokenizer, token.token_id);
    json top = json::array();
    for (const TokenLogprob& alt : token.top) {
      const std::string alt_text = TokenText(tokenizer, alt.token_id);
      top.push_back({{"token", alt_text}, {"logprob", alt.logprob}, {"bytes", Bytes(alt_text)}});
    }
    out->push_back({{"token", text},
                    {"logprob", token.logprob},
                    {"bytes", Bytes(text)},
                    {"top_logprobs", std::move(top)}});
  }
}

json EmptyLogprobs(Endpoint endpoint) {
  if (endpoint == Endpoint::kChat) return {{"content", json::array()}, {"refusal", nullptr}};
  return {{"tokens", json::array()},
          {"token_logprobs", json::array()},
          {"top_logprobs", json::array()},
          {"text_offset", json::array()}};
}

std::string NewResponseId(Endpoint endpoint) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return absl::StrFormat("%s-%016x%08x", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl",
                         generator(), static_cast<uint32_t>(generator()));
}

std::string SystemFingerprint() { return absl::StrCat("tessera-", ServerVersion()); }

}  // namespace tessera::server::http
