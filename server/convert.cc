#include "server/convert.h"

#include <random>
#include <span>

#include <google/protobuf/message_lite.h>

#include "absl/strings/str_cat.h"

namespace tessera::server {
namespace {

// Upper bound for a converted deadline: far enough to be "none" in practice
// while keeping steady_clock arithmetic away from overflow.
constexpr auto kMaxDeadlineDistance = std::chrono::hours(24 * 365);

SamplingParams ToSamplingParams(const v1::GenerateRequest& proto) {
  const v1::SamplingParams& s = proto.sampling();
  SamplingParams params;
  params.temperature = s.has_temperature() ? s.temperature() : 1.0f;
  params.top_k = s.top_k();
  params.top_p = s.has_top_p() ? s.top_p() : 1.0f;
  params.min_p = s.min_p();
  params.repetition_penalty = s.has_repetition_penalty() ? s.repetition_penalty() : 1.0f;
  params.presence_penalty = s.presence_penalty();
  params.frequency_penalty = s.frequency_penalty();
  params.has_seed = true;
  params.seed = s.has_seed() ? s.seed() : RandomSeed();
  params.top_logprobs = proto.top_logprobs();
  params.logprobs = proto.logprobs() || proto.top_logprobs() > 0;
  return params;
}

StoppingCriteria ToStoppingCriteria(const v1::GenerateRequest& proto) {
  const v1::StoppingCriteria& s = proto.stopping();
  StoppingCriteria stopping;
  stopping.max_tokens = EffectiveMaxTokens(proto);
  stopping.stop_strings.assign(s.stop().begin(), s.stop().end());
  stopping.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  stopping.ignore_eos = s.ignore_eos();
  return stopping;
}

std::string TokenText(const Tokenizer& tokenizer, int32_t id) {
  return tokenizer.Decode(std::span<const TokenId>(&id, 1), /*strip_leading_space=*/false);
}

template <typename Response>
void AppendTokensTo(const TokenEvent& event, bool with_logprobs, const Tokenizer& tokenizer,
                    Response* response) {
  response->mutable_text()->append(ToLossyUtf8(event.text));
  for (const GeneratedToken& token : event.tokens) {
    response->add_token_ids(token.token_id);
    if (!with_logprobs) continue;
    v1::TokenLogprobs* entry = response->add_logprobs();
    entry->set_token_id(token.token_id);
    entry->set_logprob(token.logprob);
    for (const TokenLogprob& alt : token.top) {
      v1::TopLogprob* top = entry->add_top();
      top->set_token_id(alt.token_id);
      top->set_logprob(alt.logprob);
      top->set_text(TokenText(tokenizer, alt.token_id));
    }
  }
}

template <typename Response>
void SetFinishOn(const FinishEvent& event, Response* response) {
  response->mutable_text()->append(ToLossyUtf8(event.text));
  response->set_finish_reason(ToProtoFinishReason(event.reason));
  response->mutable_usage()->set_prompt_tokens(event.prompt_tokens);
  response->mutable_usage()->set_completion_tokens(event.completion_tokens);
  response->mutable_usage()->set_cached_prompt_tokens(event.cached_prompt_tokens);
  v1::Timings* timings = response->mutable_timings();
  timings->set_queue_seconds(event.timings.queue_seconds);
  timings->set_time_to_first_token_seconds(event.timings.time_to_first_token_seconds);
  timings->set_total_seconds(event.timings.total_seconds);
}

// Length of the UTF-8 sequence a lead byte starts, or 0 for a byte that
// cannot start one.
size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

}  // namespace

absl::Status CheckRequestMetadata(const grpc::ServerContextBase& context) {
  size_t bytes = 0;
  for (const auto& [key, value] : context.client_metadata()) bytes += key.size() + value.size();
  if (bytes > kMaxRequestMetadataBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("request metadata of ", bytes,
                                                     " bytes exceeds the limit of ",
                                                     kMaxRequestMetadataBytes));
  }
  return absl::OkStatus();
}

absl::Status CancelledIfGone(const grpc::ServerContextBase& context, const absl::Status& status) {
  if (status.ok()) return status;
  return CancelledIfGone(context.IsCancelled(), context.deadline(),
                         std::chrono::system_clock::now(), status);
}

absl::Status CancelledIfGone(bool cancelled, std::chrono::system_clock::time_point deadline,
                             std::chrono::system_clock::time_point now, const absl::Status& status) {
  if (status.ok() || status.code() == absl::StatusCode::kCancelled ||
      status.code() == absl::StatusCode::kDeadlineExceeded || !cancelled) {
    return status;
  }
  if (CancelStatus(deadline, now).error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError("the deadline passed before the request was read");
  }
  return absl::CancelledError("the client cancelled the call before its request was read");
}

absl::Status ParseMessage(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* message) {
  grpc::Slice slice;
  // An empty message may arrive as no buffer at all.
  if (!buffer.Valid()) {
    message->Clear();
    return absl::OkStatus();
  }
  if (!buffer.DumpToSingleSlice(&slice).ok() ||
      !message->ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ",
                                                   message->GetTypeName(),
                                                   " (string fields must hold valid UTF-8)"));
  }
  return absl::OkStatus();
}

grpc::ByteBuffer SerializeMessage(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

absl::StatusOr<GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& proto,
                                                         const Tokenizer& tokenizer,
                                                         const ModelLimits& limits) {
  GenerationRequest request;
  if (proto.prompt_case() == v1::GenerateRequest::kText) {
    request.prompt_ids = tokenizer.Encode(proto.text(), tokenizer.add_bos());
  } else {
    request.prompt_ids.assign(proto.token_ids().ids().begin(), proto.token_ids().ids().end());
  }
  request.stopping = ToStoppingCriteria(proto);
  absl::Status status = ValidatePrompt(request.prompt_ids, request.stopping.max_tokens, limits);
  if (!status.ok()) return status;
  request.sampling = ToSamplingParams(proto);
  request.priority = proto.priority();
  return request;
}

uint64_t RandomSeed() {
  // One generator per thread, seeded once from the OS entropy source.
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }()};
  return generator();
}

Clock::time_point ToEngineDeadline(std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) return Clock::time_point::max();
  auto remaining = deadline - std::chrono::system_clock::now();
  if (remaining > kMaxDeadlineDistance) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(remaining);
}

grpc::Status CancelStatus(std::chrono::system_clock::time_point deadline,
                          std::chrono::system_clock::time_point now) {
  if (deadline != std::chrono::system_clock::time_point::max() &&
      deadline <= now + kDeadlineSlack) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
}

void AppendTokens(const TokenEvent& event, bool with_logprobs, const Tokenizer& tokenizer,
                  v1::GenerateResponse* response) {
  AppendTokensTo(event, with_logprobs, tokenizer, response);
}

void AppendTokens(const TokenEvent& event, bool with_logprobs, const Tokenizer& tokenizer,
                  v1::CompleteResponse* response) {
  AppendTokensTo(event, with_logprobs, tokenizer, response);
}

void SetFinish(const FinishEvent& event, v1::GenerateResponse* response) {
  SetFinishOn(event, response);
}

void SetFinish(const FinishEvent& event, v1::CompleteResponse* response) {
  SetFinishOn(event, response);
}

v1::FinishReason ToProtoFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case FinishReason::kCancelled:
    case FinishReason::kDeadline:
      return v1::FINISH_REASON_CANCELLED;
    case FinishReason::kError:
      return v1::FINISH_REASON_UNSPECIFIED;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

grpc::Status FinishStatus(const FinishEvent& event,
                          const std::optional<grpc::Status>& client_cancel) {
  switch (event.reason) {
    case FinishReason::kLength:
    case FinishReason::kStop:
    case FinishReason::kEos:
      return grpc::Status::OK;
    case FinishReason::kCancelled:
      // Without a client cancel, the server shut down: the client gets a
      // regular last message with FINISH_REASON_CANCELLED.
      return client_cancel.value_or(grpc::Status::OK);
    case FinishReason::kDeadline:
      return grpc::Status(
          grpc::StatusCode::DEADLINE_EXCEEDED,
          absl::StrCat("deadline exceeded after ", event.completion_tokens, " generated tokens"));
    case FinishReason::kError:
      break;
  }
  std::string message(event.status.message());
  return grpc::Status(grpc::StatusCode::INTERNAL, message.empty() ? "internal error" : message);
}

std::string ToLossyUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(text.size() + 8);
  size_t i = 0;
  while (i < text.size()) {
    size_t len = SequenceLength(static_cast<unsigned char>(text[i]));
    if (len > 0 && i + len <= text.size() && IsValidUtf8(text.substr(i, len))) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  return out;
}

}  // namespace tessera::server
