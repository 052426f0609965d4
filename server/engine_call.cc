#include "server/engine_call.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "server/auth/authenticator.h"
#include "server/convert.h"
#include "server/validation.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::server {

absl::StatusOr<PreparedCall> PrepareCall(const grpc::CallbackServerContext& context,
                                         const grpc::ByteBuffer& raw, ServiceEnv& env) {
  const Clock::time_point arrival = Clock::now();
  absl::Status status = CheckRequestMetadata(context);
  if (!status.ok()) return status;
  v1::GenerateRequest proto;
  status = ParseMessage(raw, &proto);
  if (!status.ok()) return status;
  std::string key_name;
  if (env.key_queue != nullptr && env.auth != nullptr) {
    // The auth processor already let the call in; this only names its key.
    auth::Credentials credentials;
    const auto& metadata = context.client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      credentials.authorization = absl::string_view(it->second.data(), it->second.size());
    }
    if (auto it = metadata.find("x-api-key"); it != metadata.end()) {
      credentials.api_key = absl::string_view(it->second.data(), it->second.size());
    }
    // A key removed by a reload since the check: refused as unknown now.
    std::optional<std::string> name = env.auth->Identify(credentials);
    if (!name.has_value()) return absl::UnauthenticatedError("incorrect API key provided");
    key_name = *std::move(name);
  }
  return PrepareRequest(proto, arrival, ToEngineDeadline(context.deadline()), env, key_name);
}

absl::StatusOr<PreparedCall> PrepareRequest(const v1::GenerateRequest& proto,
                                            Clock::time_point arrival, Clock::time_point deadline,
                                            ServiceEnv& env, const std::string& key_name) {
  absl::StatusOr<std::shared_ptr<Engine>> engine = env.state->GetEngineForGeneration();
  if (!engine.ok()) return engine.status();
  const ModelInfo& info = (*engine)->model_info();
  const ModelLimits limits{info.vocab_size, info.context_length};
  absl::Status status = ValidateGenerateRequest(proto, limits);
  if (!status.ok()) return status;
  absl::StatusOr<GenerationRequest> request =
      BuildGenerationRequest(proto, (*engine)->tokenizer(), limits);
  if (!request.ok()) return request.status();

  PreparedCall prepared;
  prepared.engine = *std::move(engine);
  prepared.request = *std::move(request);
  prepared.request.id = env.next_request_id.fetch_add(1, std::memory_order_relaxed);
  prepared.request.arrival = arrival;
  prepared.request.deadline = deadline;
  prepared.with_logprobs = prepared.request.sampling.logprobs;
  prepared.client_request_id = proto.request_id();
  if (env.key_queue != nullptr && !key_name.empty()) {
    absl::StatusOr<auth::KeyQueue::Ticket> ticket = env.key_queue->Enter(key_name);
    if (!ticket.ok()) return ticket.status();
    prepared.queue_ticket = *std::move(ticket);
  }
  return prepared;
}

EngineCall::EngineCall(const grpc::CallbackServerContext* context, Metrics* metrics)
    : context_(context), metrics_(metrics) {}

absl::Status EngineCall::Submit(PreparedCall prepared) {
  tokenizer_ = &prepared.engine->tokenizer();
  with_logprobs_ = prepared.with_logprobs;
  id_ = prepared.request.id;
  spdlog::debug("request {} (client id '{}'): {} prompt tokens, max_tokens {}", id_,
                prepared.client_request_id, prepared.request.prompt_ids.size(),
                prepared.request.stopping.max_tokens);
  Engine* engine = prepared.engine.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    engine_ = std::move(prepared.engine);
    submitted_ = true;
    queue_ticket_ = std::move(prepared.queue_ticket);
  }
  absl::Status status = engine->Submit(std::move(prepared.request), shared_from_this());
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_ = false;
    queue_ticket_.Release();
  }
  return status;
}

void EngineCall::OnCancel() {
  // The call is cancelled when the client cancels and when its deadline
  // passes; the client is told which.
  grpc::Status status = CancelStatus(context_->deadline(), std::chrono::system_clock::now());
  Engine* engine = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    client_cancel_ = status;
    if (submitted_ && !engine_done_) engine = engine_.get();
  }
  // gRPC runs OnDone (which releases engine_) only after OnCancel returns.
  if (engine != nullptr) engine->Cancel(id_);
}

void EngineCall::OnDone() {
  // Declared before the lock so that the reference is dropped after unlocking.
  std::shared_ptr<Engine> engine;
  std::lock_guard<std::mutex> lock(mu_);
  engine = std::move(engine_);
}

void EngineCall::RecordTokenEvent() {
  queue_ticket_.Release();  // running now: no longer queued
  const Clock::time_point now = Clock::now();
  if (last_token_event_) {
    metrics_->RecordInterTokenLatency(
        std::chrono::duration<double>(now - *last_token_event_).count());
  }
  last_token_event_ = now;
}

void EngineCall::ClientGoneLocked() {
  if (client_cancel_) return;
  const auto deadline =
      context_ ? context_->deadline() : std::chrono::system_clock::time_point::max();
  const grpc::Status why = CancelStatus(deadline, std::chrono::system_clock::now());
  client_cancel_ = why.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                       ? why
                       : grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke");
}

grpc::Status EngineCall::FinishLocked(const FinishEvent& event) {
  engine_done_ = true;
  queue_ticket_.Release();
  grpc::Status status = FinishStatus(event, client_cancel_);
  // Metrics first: a client that sees the end may scrape right away.
  metrics_->RecordFinished(event, status);
  spdlog::debug("request {} finished: {}, {} tokens, status {}", id_,
                FinishReasonName(event.reason), event.completion_tokens,
                static_cast<int>(status.error_code()));
  return status;
}

}  // namespace tessera::server
