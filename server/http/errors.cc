#include "server/http/errors.h"

#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "server/http/json_body.h"

namespace tessera::server::http {
namespace {

constexpr char kParamPayload[] = "tessera.dev/http-param";

const char* TypeFor(int status) {
  switch (status) {
    case 400:
    case 404:
    case 405:
    case 413:
    case 415:
    case 431:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    default:
      return "server_error";
  }
}

// gRPC field names in validation messages, and the OpenAI parameter each
// one comes from. Longest first, so that a prefix does not match early.
constexpr std::pair<const char*, const char*> kFieldNames[] = {
    {"sampling.repetition_penalty", "repetition_penalty"},
    {"sampling.presence_penalty", "presence_penalty"},
    {"sampling.frequency_penalty", "frequency_penalty"},
    {"sampling.temperature", "temperature"},
    {"sampling.top_k", "top_k"},
    {"sampling.top_p", "top_p"},
    {"sampling.min_p", "min_p"},
    {"stopping.stop_token_ids", "stop_token_ids"},
    {"stopping.max_tokens", "max_tokens"},
    {"stopping.stop", "stop"},
    {"top_logprobs", "top_logprobs"},
    {"token_ids", "prompt"},
    {"request_id", "user"},
    {"priority", "priority"},
    {"prompt", "prompt"},
    {"text", "prompt"},
};

}  // namespace

absl::Status InvalidParam(absl::string_view param, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kParamPayload, absl::Cord(param));
  return status;
}

HttpError MakeError(int status, std::string message, std::string code, std::string param) {
  HttpError error;
  error.status = status;
  error.message = std::move(message);
  error.type = TypeFor(status);
  error.code = std::move(code);
  error.param = std::move(param);
  return error;
}

HttpError ErrorFromStatus(const absl::Status& status) {
  std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument: {
      std::string param;
      if (absl::optional<absl::Cord> payload = status.GetPayload(kParamPayload)) {
        param = std::string(*payload);
      } else {
        for (const auto& [field, name] : kFieldNames) {
          if (absl::StartsWith(message, field)) {
            param = name;
            message = absl::StrReplaceAll(message, {{field, name}});
            break;
          }
        }
        message = absl::StrReplaceAll(message, {{"stopping.max_tokens", "max_tokens"}});
      }
      return MakeError(400, message, "", param);
    }
    case absl::StatusCode::kNotFound:
      return MakeError(404, message, "not_found");
    case absl::StatusCode::kResourceExhausted:
      return MakeError(429, message, "rate_limit_exceeded");
    case absl::StatusCode::kUnavailable:
      return MakeError(503, message, "unavailable");
    default:
      return MakeError(500, message.empty() ? "internal error" : message, "internal_error");
  }
}

std::string ErrorBody(const HttpError& error) {
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  nlohmann::json body = {{"error",
                          {{"message", error.message},
                           {"type", error.type},
                           {"param", or_null(error.param)},
                           {"code", or_null(error.code)}}}};
  return DumpJson(body);
}

}  // namespace tessera::server::http
