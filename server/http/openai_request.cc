#include "server/http/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/http/errors.h"

namespace tessera::server::http {
namespace {

using nlohmann::json;

// The field when present and not null.
const json* Field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status WrongType(const char* name, const char* type) {
  return InvalidParam(name, absl::StrCat("'", name, "' must be ", type));
}

absl::StatusOr<std::optional<double>> GetNumber(const json& body, const char* name) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return WrongType(name, "a number");
  return std::optional<double>(v->get<double>());
}

absl::StatusOr<std::optional<int64_t>> GetInt(const json& body, const char* name, int64_t low,
                                              int64_t high) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number_integer()) return WrongType(name, "an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(high)) {
    return InvalidParam(name, absl::StrCat("'", name, "' must be in [", low, ", ", high, "]"));
  }
  const int64_t value = v->is_number_unsigned() ? static_cast<int64_t>(v->get<uint64_t>())
                                                : v->get<int64_t>();
  if (value < low || value > high) {
    return InvalidParam(name, absl::StrCat("'", name, "' must be in [", low, ", ", high,
                                           "], got ", value));
  }
  return std::optional<int64_t>(value);
}

absl::StatusOr<std::optional<bool>> GetBool(const json& body, const char* name) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return WrongType(name, "a boolean");
  return std::optional<bool>(v->get<bool>());
}

// A float field of the proto; values beyond float's range stay out of range
// (infinite) so that validation refuses them.
float ToFloat(double value) {
  if (std::fabs(value) > std::numeric_limits<float>::max()) {
    return value > 0 ? std::numeric_limits<float>::infinity()
                     : -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(value);
}

#define TESSERA_ASSIGN(lhs, expr)            \
  auto lhs##_or = (expr);                    \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *lhs##_or

absl::Status ParseSampling(const json& body, v1::SamplingParams* s) {
  TESSERA_ASSIGN(temperature, GetNumber(body, "temperature"));
  if (temperature) s->set_temperature(ToFloat(*temperature));
  TESSERA_ASSIGN(top_p, GetNumber(body, "top_p"));
  if (top_p) s->set_top_p(ToFloat(*top_p));
  TESSERA_ASSIGN(min_p, GetNumber(body, "min_p"));
  if (min_p) s->set_min_p(ToFloat(*min_p));
  TESSERA_ASSIGN(repetition, GetNumber(body, "repetition_penalty"));
  if (repetition) s->set_repetition_penalty(ToFloat(*repetition));
  TESSERA_ASSIGN(presence, GetNumber(body, "presence_penalty"));
  if (presence) s->set_presence_penalty(ToFloat(*presence));
  TESSERA_ASSIGN(frequency, GetNumber(body, "frequency_penalty"));
  if (frequency) s->set_frequency_penalty(ToFloat(*frequency));
  // top_k: -1 (vLLM's "off") and 0 both mean no limit.
  TESSERA_ASSIGN(top_k, GetInt(body, "top_k", -1, std::numeric_limits<int32_t>::max()));
  if (top_k) s->set_top_k(*top_k < 0 ? 0 : static_cast<int32_t>(*top_k));
  TESSERA_ASSIGN(seed, GetInt(body, "seed", std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max()));
  if (seed) s->set_seed(static_cast<uint64_t>(*seed));
  return absl::OkStatus();
}

absl::Status ParseStop(const json& body, v1::StoppingCriteria* stopping) {
  const json* stop = Field(body, "stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    stopping->add_stop(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) return WrongType("stop", "a string or an array of strings");
  for (const json& item : *stop) {
    if (!item.is_string()) return WrongType("stop", "a string or an array of strings");
    // More than the limit is refused by validation; stop copying early.
    if (stopping->stop_size() > 64) break;
    stopping->add_stop(item.get<std::string>());
  }
  return absl::OkStatus();
}

// response_format: only {"type": "text"}. Constrained output (JSON mode,
// JSON schemas) is not implemented, so a request for it is refused rather
// than answered with text that ignores it.
absl::Status CheckResponseFormat(const json& body) {
  const json* format = Field(body, "response_format");
  if (format == nullptr) return absl::OkStatus();
  if (!format->is_object()) return WrongType("response_format", "an object");
  const json* type = Field(*format, "type");
  if (type == nullptr || !type->is_string()) {
    return InvalidParam("response_format", "'response_format' needs a string 'type'");
  }
  if (type->get<std::string>() == "text") return absl::OkStatus();
  return InvalidParam("response_format",
                      "'response_format' type '" + type->get<std::string>() +
                          "' is not supported: only 'text' (no constrained decoding)");
}

// What both endpoints share: model, n, stream, user, priority, stopping and
// sampling.
absl::Status ParseCommon(const json& body, OpenAiRequest* out) {
  if (!body.is_object()) return InvalidParam("", "the request body must be a JSON object");
  const json* model = Field(body, "model");
  if (model == nullptr) return InvalidParam("model", "'model' is required");
  if (!model->is_string()) return WrongType("model", "a string");
  out->model = model->get<std::string>();
  TESSERA_ASSIGN(n, GetInt(body, "n", 1, kMaxChoices));
  out->n = n ? static_cast<int>(*n) : 1;
  TESSERA_ASSIGN(stream, GetBool(body, "stream"));
  out->stream = stream.value_or(false);
  if (const json* options = Field(body, "stream_options")) {
    if (!options->is_object()) return WrongType("stream_options", "an object");
    TESSERA_ASSIGN(usage, GetBool(*options, "include_usage"));
    out->include_usage = usage.value_or(false);
  }
  if (const json* user = Field(body, "user")) {
    if (!user->is_string()) return WrongType("user", "a string");
    out->proto.set_request_id(user->get<std::string>());
  }
  // vLLM's extension: lower is more urgent, under --scheduling-policy
  // priority. The range is checked where gRPC requests are.
  TESSERA_ASSIGN(priority, GetInt(body, "priority", std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max()));
  if (priority) out->proto.set_priority(static_cast<int32_t>(*priority));
  v1::StoppingCriteria* stopping = out->proto.mutable_stopping();
  TESSERA_ASSIGN(ignore_eos, GetBool(body, "ignore_eos"));
  stopping->set_ignore_eos(ignore_eos.value_or(false));
  absl::Status status = ParseStop(body, stopping);
  if (!status.ok()) return status;
  status = CheckResponseFormat(body);
  if (!status.ok()) return status;
  return ParseSampling(body, out->proto.mutable_sampling());
}

absl::Status SetMaxTokens(std::optional<int64_t> value, OpenAiRequest* out) {
  if (!value) return absl::OkStatus();
  out->proto.mutable_stopping()->set_max_tokens(static_cast<int32_t>(*value));
  out->max_tokens_set = true;
  return absl::OkStatus();
}

absl::Status ParsePrompt(const json& body, v1::GenerateRequest* proto) {
  const json* prompt = Field(body, "prompt");
  if (prompt == nullptr) return InvalidParam("prompt", "'prompt' is required");
  const json* single = prompt;
  // A list of one prompt; several prompts in one request are not supported.
  if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number()) {
    if (prompt->size() != 1) {
      return InvalidParam("prompt", "'prompt' must be one prompt (use n for several choices)");
    }
    single = &(*prompt)[0];
  }
  if (single->is_string()) {
    proto->set_text(single->get<std::string>());
    return absl::OkStatus();
  }
  if (!single->is_array()) {
    return WrongType("prompt", "a string, an array of token ids or a list of one of these");
  }
  v1::TokenIds* ids = proto->mutable_token_ids();
  for (const json& id : *single) {
    if (!id.is_number_integer()) return WrongType("prompt", "an array of integer token ids");
    constexpr uint64_t kMaxId = std::numeric_limits<int32_t>::max();
    const int64_t value = id.is_number_unsigned()
                              ? static_cast<int64_t>(std::min(id.get<uint64_t>(), kMaxId))
                              : id.get<int64_t>();
    // Out-of-range ids are kept out of range for validation to name.
    ids->add_ids(static_cast<int32_t>(std::clamp<int64_t>(value, -1, std::numeric_limits<int32_t>::max())));
  }
  return absl::OkStatus();
}

absl::Status ParseMessages(const json& body, OpenAiRequest* out) {
  const json* messages = Field(body, "messages");
  if (messages == nullptr) return InvalidParam("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) {
    return WrongType("messages", "a non-empty array of messages");
  }
  for (const json& message : *messages) {
    if (!message.is_object()) return WrongType("messages", "an array of objects");
    const json* role = Field(message, "role");
    if (role == nullptr || !role->is_string()) {
      return InvalidParam("messages", "every message needs a string 'role'");
    }
    // As OpenAI's API: text, null (an assistant turn with tool calls), or an
    // array of content parts, whatever the template would make of others.
    const json* content = Field(message, "content");
    if (content != nullptr && !content->is_string() && !content->is_null() &&
        !(content->is_array() &&
          std::all_of(content->begin(), content->end(), [](const json& p) { return p.is_object(); }))) {
      return InvalidParam("messages",
                          "a message's 'content' must be a string, null or an array of content parts");
    }
  }
  out->messages = *messages;
  if (const json* tools = Field(body, "tools")) {
    if (!tools->is_array()) return WrongType("tools", "an array");
    out->tools = *tools;
  }
  TESSERA_ASSIGN(add, GetBool(body, "add_generation_prompt"));
  out->add_generation_prompt = add.value_or(true);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(const json& body) {
  OpenAiRequest out;
  out.endpoint = Endpoint::kCompletions;
  absl::Status status = ParseCommon(body, &out);
  if (!status.ok()) return status;
  TESSERA_ASSIGN(max_tokens, GetInt(body, "max_tokens", 1, std::numeric_limits<int32_t>::max()));
  status = SetMaxTokens(max_tokens, &out);
  if (!status.ok()) return status;
  TESSERA_ASSIGN(logprobs, GetInt(body, "logprobs", 0, std::numeric_limits<int32_t>::max()));
  if (logprobs) {
    out.proto.set_logprobs(true);
    out.proto.set_top_logprobs(static_cast<int32_t>(*logprobs));
  }
  TESSERA_ASSIGN(echo, GetBool(body, "echo"));
  if (echo.value_or(false)) return InvalidParam("echo", "'echo' is not supported");
  status = ParsePrompt(body, &out.proto);
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<OpenAiRequest> ParseChatRequest(const json& body) {
  OpenAiRequest out;
  out.endpoint = Endpoint::kChat;
  absl::Status status = ParseCommon(body, &out);
  if (!status.ok()) return status;
  // max_completion_tokens replaces the deprecated max_tokens; it wins.
  TESSERA_ASSIGN(max_tokens, GetInt(body, "max_tokens", 1, std::numeric_limits<int32_t>::max()));
  TESSERA_ASSIGN(max_completion,
                 GetInt(body, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max()));
  status = SetMaxTokens(max_completion ? max_completion : max_tokens, &out);
  if (!status.ok()) return status;
  TESSERA_ASSIGN(logprobs, GetBool(body, "logprobs"));
  TESSERA_ASSIGN(top, GetInt(body, "top_logprobs", 0, std::numeric_limits<int32_t>::max()));
  if (top && !logprobs.value_or(false)) {
    return InvalidParam("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  }
  out.proto.set_logprobs(logprobs.value_or(false));
  if (top) out.proto.set_top_logprobs(static_cast<int32_t>(*top));
  status = ParseMessages(body, &out);
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<OpenAiRequest> ParseTemplateRequest(const json& body) {
  if (!body.is_object()) return InvalidParam("", "the request body must be a JSON object");
  OpenAiRequest out;
  out.endpoint = Endpoint::kChat;
  absl::Status status = ParseMessages(body, &out);
  if (!status.ok()) return status;
  return out;
}

}  // namespace tessera::server::http
