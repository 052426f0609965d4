#include "server/http/generation.h"

#include <utility>

#include "server/convert.h"
#include "server/http/json_body.h"

namespace tessera::server::http {
namespace {

using nlohmann::json;

// How a request the engine finished ends for its client; OK for a normal end.
grpc::Status HttpFinishStatus(const FinishEvent& event, bool client_gone) {
  if (event.reason == FinishReason::kCancelled && client_gone) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
  }
  if (event.reason == FinishReason::kCancelled) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
  }
  return FinishStatus(event, std::nullopt);
}

}  // namespace

void ChoiceSink::OnTokens(TokenEvent event) {
  queue_ticket_.Release();
  const Clock::time_point now = Clock::now();
  if (last_event_) {
    metrics_->RecordInterTokenLatency(std::chrono::duration<double>(now - *last_event_).count());
  }
  last_event_ = now;
  if (std::shared_ptr<ChoiceTarget> target = target_.lock()) {
    ChoiceEvent out;
    out.index = index_;
    out.tokens = std::move(event);
    target->Deliver(std::move(out));
  }
}

void ChoiceSink::OnFinish(FinishEvent event) {
  queue_ticket_.Release();
  metrics_->RecordFinished(event, HttpFinishStatus(event, client_gone_->load()), Front::kHttp);
  if (std::shared_ptr<ChoiceTarget> target = target_.lock()) {
    ChoiceEvent out;
    out.index = index_;
    out.finished = true;
    out.finish = std::move(event);
    target->Deliver(std::move(out));
  }
}

Generation::Generation(ResponseMeta meta, int n, bool include_usage, bool logprobs,
                       const Tokenizer* tokenizer)
    : meta_(std::move(meta)),
      include_usage_(include_usage),
      logprobs_(logprobs),
      tokenizer_(tokenizer),
      choices_(n),
      unfinished_(n) {
  for (Choice& choice : choices_) {
    if (logprobs_) choice.logprobs = EmptyLogprobs(meta_.endpoint);
  }
}

std::string Generation::Sse(const json& value) const {
  std::string out = "data: ";
  out += DumpJson(value);
  out += "\n\n";
  return out;
}

std::string Generation::Chunk(int index, const std::string& text, json logprobs,
                              const char* finish_reason) const {
  json chunk = ResponseObject(meta_);
  json choice = {{"index", index},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", finish_reason ? json(finish_reason) : json()}};
  if (meta_.endpoint == Endpoint::kChat) {
    choice["delta"] = finish_reason && text.empty() ? json::object() : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  chunk["choices"] = json::array({std::move(choice)});
  if (include_usage_) chunk["usage"] = nullptr;
  return Sse(chunk);
}

std::string Generation::StreamStart() {
  if (meta_.endpoint != Endpoint::kChat) return "";
  std::string out;
  for (int i = 0; i < static_cast<int>(choices_.size()); ++i) {
    json chunk = ResponseObject(meta_);
    chunk["choices"] = json::array({{{"index", i},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    if (include_usage_) chunk["usage"] = nullptr;
    out += Sse(chunk);
  }
  return out;
}

json Generation::TokenLogprobs(Choice& choice, const std::vector<GeneratedToken>& tokens) const {
  if (meta_.endpoint == Endpoint::kChat) {
    json content = json::array();
    AppendChatLogprobs(tokens, *tokenizer_, &content);
    return content;
  }
  json piece = EmptyLogprobs(Endpoint::kCompletions);
  AppendCompletionLogprobs(tokens, *tokenizer_, &choice.text_offset, &piece);
  return piece;
}

std::string Generation::OnEvent(const ChoiceEvent& event) {
  if (event.index < 0 || event.index >= static_cast<int>(choices_.size())) return "";
  if (event.finished) return OnFinish(event);
  Choice& choice = choices_[event.index];
  const std::string text = ToLossyUtf8(event.tokens.text);
  json logprobs;
  if (logprobs_ && !event.tokens.tokens.empty()) {
    json piece = TokenLogprobs(choice, event.tokens.tokens);
    if (meta_.endpoint == Endpoint::kChat) {
      for (json& entry : piece) choice.logprobs["content"].push_back(entry);
      logprobs = {{"content", std::move(piece)}, {"refusal", nullptr}};
    } else {
      for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
        for (json& entry : piece[key]) choice.logprobs[key].push_back(entry);
      }
      logprobs = std::move(piece);
    }
  }
  choice.text += text;
  if (!meta_.stream || (text.empty() && logprobs.is_null())) return "";
  return Chunk(event.index, text, std::move(logprobs), nullptr);
}

std::string Generation::OnFinish(const ChoiceEvent& event) {
  Choice& choice = choices_[event.index];
  if (choice.finish_reason != nullptr) return "";  // a second finish: ignored
  --unfinished_;
  const FinishEvent& finish = event.finish;
  const std::string text = ToLossyUtf8(finish.text);
  choice.text += text;
  choice.finish_reason = FinishReasonText(finish.reason);
  choice.completion_tokens = finish.completion_tokens;
  prompt_tokens_ = finish.prompt_tokens;
  // The prompt is counted once, as the first choice's request computed it.
  if (event.index == 0) cached_tokens_ = finish.cached_prompt_tokens;
  const grpc::Status status = HttpFinishStatus(finish, false);
  if (!status.ok() && !error_) {
    error_ = ErrorFromStatus(absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                                          status.error_message()));
  }
  if (!meta_.stream) return "";
  std::string out;
  if (status.ok()) {
    out = Chunk(event.index, text, nullptr, choice.finish_reason);
  } else {
    out = Sse(json::parse(ErrorBody(*error_)));
  }
  if (!done()) return out;
  if (include_usage_) {
    json chunk = ResponseObject(meta_);
    chunk["choices"] = json::array();
    int64_t completion = 0;
    for (const Choice& c : choices_) completion += c.completion_tokens;
    chunk["usage"] = UsageJson(prompt_tokens_, completion, cached_tokens_);
    out += Sse(chunk);
  }
  out += "data: [DONE]\n\n";
  return out;
}

json Generation::FinalChoice(int index, const Choice& choice) const {
  json logprobs = logprobs_ ? choice.logprobs : json();
  if (meta_.endpoint == Endpoint::kChat) {
    return {{"index", index},
            {"message", {{"role", "assistant"}, {"content", choice.text}, {"refusal", nullptr}}},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", choice.finish_reason}};
  }
  return {{"text", choice.text},
          {"index", index},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", choice.finish_reason}};
}

std::string Generation::FinalBody() const {
  json body = ResponseObject(meta_);
  body["choices"] = json::array();
  int64_t completion = 0;
  for (int i = 0; i < static_cast<int>(choices_.size()); ++i) {
    body["choices"].push_back(FinalChoice(i, choices_[i]));
    completion += choices_[i].completion_tokens;
  }
  body["usage"] = UsageJson(prompt_tokens_, completion, cached_tokens_);
  return DumpJson(body);
}

}  // namespace tessera::server::http
