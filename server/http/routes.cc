#include "server/http/routes.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/auth/authenticator.h"
#include "server/http/json_body.h"
#include "server/http/openai_request.h"
#include "server/status.h"
#include "server/validation.h"

namespace tessera::server::http {
namespace {

using nlohmann::json;

struct RouteSpec {
  const char* path;
  const char* method;
};

constexpr RouteSpec kRoutes[] = {
    {"/v1/models", "GET"},          {"/health", "GET"},
    {"/metrics", "GET"},            {"/v1/completions", "POST"},
    {"/v1/chat/completions", "POST"}, {"/apply-template", "POST"},
};

Reply JsonReply(const json& body) { return Reply{200, "application/json", DumpJson(body), ""}; }

Reply HealthReply(HttpEnv& env) {
  absl::StatusOr<std::shared_ptr<Engine>> engine = env.service->state->GetEngineForGeneration();
  if (!engine.ok()) return ErrorReply(ErrorFromStatus(engine.status()));
  if (!(*engine)->Stats().healthy) {
    return ErrorReply(MakeError(503, "the engine is unhealthy", "unavailable"));
  }
  return JsonReply({{"status", "ok"}});
}

Reply MetricsReply(HttpEnv& env) {
  return Reply{200, "text/plain; version=0.0.4", env.service->metrics->Scrape(), ""};
}

Reply ModelsReply(HttpEnv& env) {
  absl::StatusOr<std::shared_ptr<Engine>> engine = env.service->state->GetEngine();
  if (!engine.ok()) return ErrorReply(ErrorFromStatus(engine.status()));
  const ModelInfo& info = (*engine)->model_info();
  json model = {{"id", info.name},
                {"object", "model"},
                {"created", env.started_at},
                {"owned_by", "tessera"},
                {"max_model_len", info.context_length},
                // llama.cpp's llama-server has these too (tessera-bench reads them).
                {"meta", {{"n_vocab", info.vocab_size}, {"n_ctx_train", info.context_length}}}};
  return JsonReply({{"object", "list"}, {"data", json::array({model})}});
}

bool IsJsonContentType(const std::string& content_type) {
  if (content_type.empty()) return true;  // taken as JSON
  std::string type = absl::AsciiStrToLower(content_type.substr(0, content_type.find(';')));
  absl::StripAsciiWhitespace(&type);
  return type == "application/json";
}

HttpError NoChatTemplate() {
  return MakeError(400, "the model has no chat template; use /v1/completions", "no_chat_template");
}

Reply ApplyTemplate(const json& body, HttpEnv& env) {
  absl::StatusOr<OpenAiRequest> request = ParseTemplateRequest(body);
  if (!request.ok()) return ErrorReply(ErrorFromStatus(request.status()));
  if (!CanRender(env.chat)) return ErrorReply(NoChatTemplate());
  absl::StatusOr<std::string> prompt =
      env.chat->Render(request->messages, request->tools, request->add_generation_prompt);
  if (!prompt.ok()) return ErrorReply(ErrorFromStatus(prompt.status()));
  return JsonReply({{"prompt", *prompt}});
}

// Renders a chat request's messages and sets its prompt ids; without
// max_tokens the completion may fill the context (OpenAI's default).
absl::Status SetChatPrompt(OpenAiRequest& request, const Engine& engine, const ChatRenderer& chat) {
  absl::StatusOr<std::string> prompt =
      chat.Render(request.messages, request.tools, request.add_generation_prompt);
  if (!prompt.ok()) return prompt.status();
  if (prompt->size() > kMaxTextBytes) {
    return InvalidParam("messages", absl::StrCat("the rendered prompt must be at most ",
                                                 kMaxTextBytes, " bytes"));
  }
  const std::vector<TokenId> ids = TokenizeChatPrompt(engine.tokenizer(), *prompt);
  request.proto.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  if (!request.max_tokens_set) {
    const int64_t room = engine.model_info().context_length - static_cast<int64_t>(ids.size());
    request.proto.mutable_stopping()->set_max_tokens(static_cast<int32_t>(std::max<int64_t>(room, 1)));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenAiRequest> ParseGeneration(const HttpRequest& http, const json& body,
                                              HttpEnv& env, const Engine& engine) {
  const bool chat = http.path == "/v1/chat/completions";
  absl::StatusOr<OpenAiRequest> request = chat ? ParseChatRequest(body) : ParseCompletionRequest(body);
  if (!request.ok()) return request.status();
  if (request->model != engine.model_info().name) {
    return absl::NotFoundError(absl::StrCat("the model '", request->model,
                                            "' does not exist; this server serves '",
                                            engine.model_info().name, "'"));
  }
  if (chat) {
    if (!CanRender(env.chat)) return absl::FailedPreconditionError("no chat template");
    absl::Status status = SetChatPrompt(*request, engine, *env.chat);
    if (!status.ok()) return status;
  }
  return request;
}

// Submits the n choices. All n are prepared first, each taking its place in
// its API key's queue, so that a key without room for n refuses the request
// before the engine sees any of it and its places are free again at once.
// More choices than a key may ever queue is a bad request (400), not a full
// queue (429): retrying it cannot succeed. On a refusal by the engine,
// cancels the choices already submitted.
absl::Status Submit(const OpenAiRequest& request, HttpEnv& env, std::weak_ptr<ChoiceTarget> target,
                    const std::string& key_name, StartedGeneration& started) {
  const auth::KeyQueue* queue = env.service->key_queue;
  if (queue != nullptr && !key_name.empty() && request.n > queue->limit()) {
    return absl::InvalidArgumentError(
        absl::StrCat("n = ", request.n, " is more than the ", queue->limit(),
                     " requests an API key may queue (--max-queued-requests-per-key)"));
  }
  const Clock::time_point arrival = Clock::now();
  std::vector<PreparedCall> calls;
  calls.reserve(request.n);
  for (int i = 0; i < request.n; ++i) {
    v1::GenerateRequest proto = request.proto;
    // Distinct choices under one seed.
    if (i > 0 && proto.sampling().has_seed()) proto.mutable_sampling()->set_seed(proto.sampling().seed() + i);
    absl::StatusOr<PreparedCall> prepared =
        PrepareRequest(proto, arrival, Clock::time_point::max(), *env.service, key_name);
    if (!prepared.ok()) return prepared.status();
    calls.push_back(*std::move(prepared));
  }
  for (int i = 0; i < request.n; ++i) {
    PreparedCall& call = calls[i];
    const uint64_t id = call.request.id;
    auto sink = std::make_shared<ChoiceSink>(target, i, env.service->metrics, started.client_gone);
    sink->SetQueueTicket(std::move(call.queue_ticket));
    absl::Status status = call.engine->Submit(std::move(call.request), std::move(sink));
    if (!status.ok()) {
      started.client_gone->store(true);
      for (uint64_t submitted : started.ids) started.engine->Cancel(submitted);
      return status;
    }
    started.ids.push_back(id);
  }
  return absl::OkStatus();
}

RouteResult StartGeneration(const HttpRequest& http, HttpEnv& env,
                            std::weak_ptr<ChoiceTarget> target, const std::string& key_name) {
  auto fail = [&](const absl::Status& status) -> RouteResult {
    env.service->metrics->RecordFailure(ToGrpcCode(status.code()), Front::kHttp);
    if (status.code() == absl::StatusCode::kFailedPrecondition) return ErrorReply(NoChatTemplate());
    return ErrorReply(ErrorFromStatus(status));
  };
  if (!IsJsonContentType(http.content_type)) {
    env.service->metrics->RecordFailure(grpc::StatusCode::INVALID_ARGUMENT, Front::kHttp);
    return ErrorReply(MakeError(415, "the body must be application/json", "unsupported_media_type"));
  }
  absl::StatusOr<json> body = ParseJsonBody(http.body);
  if (!body.ok()) return fail(body.status());
  absl::StatusOr<std::shared_ptr<Engine>> engine = env.service->state->GetEngineForGeneration();
  if (!engine.ok()) return fail(engine.status());
  absl::StatusOr<OpenAiRequest> request = ParseGeneration(http, *body, env, **engine);
  if (!request.ok()) return fail(request.status());

  StartedGeneration started;
  started.engine = *engine;
  started.stream = request->stream;
  started.client_gone = std::make_shared<std::atomic<bool>>(false);
  ResponseMeta meta{request->endpoint, NewResponseId(request->endpoint),
                    static_cast<int64_t>(std::time(nullptr)), request->model, request->stream};
  started.generation = std::make_unique<Generation>(
      std::move(meta), request->n, request->include_usage, request->proto.logprobs(),
      &started.engine->tokenizer());
  absl::Status status = Submit(*request, env, std::move(target), key_name, started);
  if (!status.ok()) return fail(status);
  return started;
}

// A 401 as OpenAI's API answers it, or nullopt when `request` may go on
// (then `key_name` is the matched key's).
std::optional<Reply> CheckKey(const HttpRequest& request, const HttpEnv& env,
                              std::string& key_name) {
  if (env.auth == nullptr || (request.path == "/health" && !env.auth_health)) return std::nullopt;
  auth::Credentials credentials;
  if (request.authorization) credentials.authorization = *request.authorization;
  if (request.api_key) credentials.api_key = *request.api_key;
  absl::StatusOr<std::string> name = env.auth->Check(credentials, Front::kHttp, request.path);
  if (name.ok()) {
    key_name = *std::move(name);
    return std::nullopt;
  }
  HttpError error = MakeError(401, std::string(name.status().message()), "invalid_api_key");
  error.type = "invalid_request_error";
  return ErrorReply(error);  // the session adds WWW-Authenticate: Bearer
}

// The metrics port: GET /metrics and nothing else; no key, as Prometheus
// scrapes it (it binds to --metrics-host, apart from the API).
Reply MetricsPortReply(const HttpRequest& request, HttpEnv& env) {
  if (request.path != "/metrics") {
    return ErrorReply(MakeError(404, absl::StrCat("no route ", request.path), "not_found"));
  }
  if (request.method != "GET") {
    Reply reply = ErrorReply(MakeError(405, "/metrics takes GET", "method_not_allowed"));
    reply.allow = "GET";
    return reply;
  }
  return MetricsReply(env);
}

}  // namespace

Reply ErrorReply(const HttpError& error) {
  return Reply{error.status, "application/json", ErrorBody(error), ""};
}

RouteResult Route(const HttpRequest& request, HttpEnv& env, std::weak_ptr<ChoiceTarget> target) {
  if (env.surface == Surface::kMetricsOnly) return MetricsPortReply(request, env);
  std::string key_name;
  if (std::optional<Reply> refused = CheckKey(request, env, key_name)) return *std::move(refused);
  const RouteSpec* route = nullptr;
  for (const RouteSpec& r : kRoutes) {
    if (request.path == r.path) route = &r;
  }
  if (route == nullptr) {
    return ErrorReply(MakeError(404, absl::StrCat("no route ", request.path), "not_found"));
  }
  if (request.method != route->method) {
    Reply reply = ErrorReply(MakeError(
        405, absl::StrCat(request.path, " takes ", route->method), "method_not_allowed"));
    reply.allow = route->method;
    return reply;
  }
  if (request.path == "/health") return HealthReply(env);
  if (request.path == "/v1/models") return ModelsReply(env);
  if (request.path == "/metrics") return MetricsReply(env);
  if (request.path == "/apply-template") {
    if (!IsJsonContentType(request.content_type)) {
      return ErrorReply(MakeError(415, "the body must be application/json", "unsupported_media_type"));
    }
    absl::StatusOr<json> body = ParseJsonBody(request.body);
    if (!body.ok()) return ErrorReply(ErrorFromStatus(body.status()));
    return ApplyTemplate(*body, env);
  }
  return StartGeneration(request, env, std::move(target), key_name);
}

}  // namespace tessera::server::http
