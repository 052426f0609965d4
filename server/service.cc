#include "server/service.h"

#include <span>

#include "engine/tokenizer/tokenizer.h"
#include "server/chat_calls.h"
#include "server/convert.h"
#include "server/generate_reactor.h"
#include "server/status.h"
#include "server/validation.h"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif

namespace tessera::server {
namespace {

// Finishes a unary call at once with `status`.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(CancelledIfGone(*context, status)));
  return reactor;
}

absl::Status TokenizeInto(const grpc::ByteBuffer& raw, const ServingState& state,
                          grpc::ByteBuffer* response) {
  v1::TokenizeRequest request;
  absl::Status status = ParseMessage(raw, &request);
  if (!status.ok()) return status;
  status = ValidateTokenizeRequest(request);
  if (!status.ok()) return status;
  absl::StatusOr<std::shared_ptr<Engine>> engine = state.GetEngine();
  if (!engine.ok()) return engine.status();
  const Tokenizer& tokenizer = (*engine)->tokenizer();
  const bool add_bos = request.has_add_bos() ? request.add_bos() : tokenizer.add_bos();
  v1::TokenizeResponse out;
  for (TokenId id : tokenizer.Encode(request.text(), add_bos)) {
    out.add_token_ids(id);
    out.add_pieces(ToLossyUtf8(tokenizer.TokenText(id)));
  }
  *response = SerializeMessage(out);
  return absl::OkStatus();
}

absl::Status DetokenizeInto(const grpc::ByteBuffer& raw, const ServingState& state,
                            grpc::ByteBuffer* response) {
  v1::DetokenizeRequest request;
  absl::Status status = ParseMessage(raw, &request);
  if (!status.ok()) return status;
  absl::StatusOr<std::shared_ptr<Engine>> engine = state.GetEngine();
  if (!engine.ok()) return engine.status();
  const ModelInfo& info = (*engine)->model_info();
  status = ValidateDetokenizeRequest(request, ModelLimits{info.vocab_size, info.context_length});
  if (!status.ok()) return status;
  std::span<const TokenId> ids(request.token_ids().data(), request.token_ids().size());
  v1::DetokenizeResponse out;
  out.set_text(ToLossyUtf8((*engine)->tokenizer().Decode(ids)));
  *response = SerializeMessage(out);
  return absl::OkStatus();
}

void FillModelInfo(const Engine& engine, v1::GetModelInfoResponse* out);

absl::Status ModelInfoInto(const grpc::ByteBuffer& raw, const ServingState& state,
                           grpc::ByteBuffer* response) {
  v1::GetModelInfoRequest request;
  absl::Status status = ParseMessage(raw, &request);
  if (!status.ok()) return status;
  absl::StatusOr<std::shared_ptr<Engine>> engine = state.GetEngine();
  if (!engine.ok()) return engine.status();
  v1::GetModelInfoResponse out;
  FillModelInfo(**engine, &out);
  *response = SerializeMessage(out);
  return absl::OkStatus();
}

void FillModelInfo(const Engine& engine, v1::GetModelInfoResponse* out) {
  const ModelInfo& info = engine.model_info();
  out->set_model_name(ToLossyUtf8(info.name));
  out->set_architecture(info.architecture);
  out->set_tokenizer(info.tokenizer_model);
  out->set_vocab_size(info.vocab_size);
  out->set_context_length(info.context_length);
  out->set_embedding_dim(info.embedding_dim);
  out->set_num_layers(info.num_layers);
  out->set_num_heads(info.num_heads);
  out->set_num_kv_heads(info.num_kv_heads);
  out->set_num_parameters(info.num_parameters);
  out->set_device(info.device);
  out->set_has_chat_template(!info.chat_template.empty());
  out->set_weight_dtype(info.weight_dtype);
  out->set_model_format(info.format);
  out->set_bos_token_id(info.bos_id);
  out->set_eos_token_id(info.eos_id);
  const EngineStats stats = engine.Stats();
  out->set_requests_running(stats.requests_running);
  out->set_requests_waiting(stats.requests_waiting);
  out->set_kv_cache_usage_ratio(stats.kv_cache_usage_ratio);
  out->set_kv_cache_cached_blocks(stats.kv_cache_cached_blocks);
  out->set_kv_cache_blocks(stats.kv_cache_blocks);
  out->set_prefix_caching(info.prefix_caching);
  out->set_scheduling_policy(info.scheduling_policy);
  out->set_server_version(ServerVersion());
  out->set_rope_scaling(info.rope_scaling);
  out->set_rope_freq_base(info.rope_freq_base);
  out->set_rope_scaling_factor(info.rope_scaling_factor);
  out->set_sliding_window(info.sliding_window);
  *out->mutable_sliding_window_layers() = {info.sliding_window_layers.begin(),
                                           info.sliding_window_layers.end()};
  out->set_rope_freq_base_sliding(info.rope_freq_base_sliding);
}

// A chat call's GenerateRequest, tokenized by the served model.
absl::StatusOr<grpc::ByteBuffer> ChatToGenerate(const grpc::ByteBuffer& raw, ServiceEnv& env) {
  absl::StatusOr<std::shared_ptr<Engine>> engine = env.state->GetEngine();
  if (!engine.ok()) return engine.status();
  return ChatToGenerateRequest(raw, env.chat, (*engine)->tokenizer());
}

}  // namespace

InferenceService::InferenceService(ServiceEnv* env) : env_(*env) {}

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartGenerate(context, *request, env_);
}

grpc::ServerUnaryReactor* InferenceService::Complete(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return StartComplete(context, *request, response, env_);
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  absl::Status status = CheckRequestMetadata(*context);
  if (status.ok()) status = TokenizeInto(*request, *env_.state, response);
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* InferenceService::Detokenize(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  absl::Status status = CheckRequestMetadata(*context);
  if (status.ok()) status = DetokenizeInto(*request, *env_.state, response);
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  absl::Status status = CheckRequestMetadata(*context);
  if (status.ok()) status = ModelInfoInto(*request, *env_.state, response);
  return FinishNow(context, status);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* InferenceService::Chat(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  absl::StatusOr<grpc::ByteBuffer> generate = ChatToGenerate(*request, env_);
  if (!generate.ok()) {
    env_.metrics->RecordFailure(ToGrpcCode(generate.status().code()));
    return FinishedWriter(ToGrpcStatus(generate.status()));
  }
  return StartGenerate(context, *generate, env_);
}

grpc::ServerUnaryReactor* InferenceService::ChatComplete(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  absl::StatusOr<grpc::ByteBuffer> generate = ChatToGenerate(*request, env_);
  if (!generate.ok()) {
    env_.metrics->RecordFailure(ToGrpcCode(generate.status().code()));
    return FinishNow(context, generate.status());
  }
  return StartComplete(context, *generate, response, env_);
}

grpc::ServerUnaryReactor* InferenceService::RenderChat(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  absl::Status status = CheckRequestMetadata(*context);
  v1::RenderChatRequest parsed;
  if (status.ok()) status = ParseMessage(*request, &parsed);
  if (status.ok()) {
    absl::StatusOr<std::string> prompt = RenderChatPrompt(parsed, env_.chat);
    status = prompt.status();
    if (prompt.ok()) {
      v1::RenderChatResponse out;
      out.set_prompt(ToLossyUtf8(*prompt));
      *response = SerializeMessage(out);
    }
  }
  return FinishNow(context, status);
}

std::string ServerVersion() { return TESSERA_VERSION; }

}  // namespace tessera::server
