#include "server/validation.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what, auto value) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what, ", got ", value));
}

std::string FloatText(float value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return absl::StrCat(value);
}

// `low_open` / `high_open` exclude the bound. NaN and infinities always fail.
absl::Status CheckRange(absl::string_view field, float value, float low, float high, bool low_open,
                        bool high_open) {
  bool ok = std::isfinite(value) && (low_open ? value > low : value >= low) &&
            (high_open ? value < high : value <= high);
  if (ok) return absl::OkStatus();
  std::string range = absl::StrCat(low_open ? "(" : "[", low, ", ", high, high_open ? ")" : "]");
  return Invalid(field, absl::StrCat("must be finite and in ", range), FloatText(value));
}

absl::Status CheckTokenId(absl::string_view field, int32_t id, const ModelLimits& limits) {
  if (id >= 0 && id < limits.vocab_size) return absl::OkStatus();
  return Invalid(field, absl::StrCat("must be in [0, ", limits.vocab_size, ")"), id);
}

absl::Status CheckText(absl::string_view field, const std::string& text) {
  if (text.size() > kMaxTextBytes) {
    return Invalid(field, absl::StrCat("must be at most ", kMaxTextBytes, " bytes"),
                   absl::StrCat(text.size(), " bytes"));
  }
  if (!IsValidUtf8(text))
    return absl::InvalidArgumentError(absl::StrCat(field, " is not valid UTF-8"));
  return absl::OkStatus();
}

absl::Status ValidateSampling(const v1::SamplingParams& s, const ModelLimits& limits) {
  if (s.has_temperature()) {
    auto st = CheckRange("sampling.temperature", s.temperature(), 0, kMaxTemperature, false, false);
    if (!st.ok()) return st;
  }
  if (s.top_k() < 0 || s.top_k() > limits.vocab_size) {
    return Invalid("sampling.top_k", absl::StrCat("must be in [0, ", limits.vocab_size, "]"),
                   s.top_k());
  }
  if (s.has_top_p()) {
    auto st = CheckRange("sampling.top_p", s.top_p(), 0, 1, true, false);
    if (!st.ok()) return st;
  }
  auto st = CheckRange("sampling.min_p", s.min_p(), 0, 1, false, false);
  if (!st.ok()) return st;
  if (s.has_repetition_penalty()) {
    st = CheckRange("sampling.repetition_penalty", s.repetition_penalty(), 0, kMaxRepetitionPenalty,
                    true, false);
    if (!st.ok()) return st;
  }
  st = CheckRange("sampling.presence_penalty", s.presence_penalty(), -kMaxAbsPenalty,
                  kMaxAbsPenalty, false, false);
  if (!st.ok()) return st;
  return CheckRange("sampling.frequency_penalty", s.frequency_penalty(), -kMaxAbsPenalty,
                    kMaxAbsPenalty, false, false);
}

absl::Status ValidateStopping(const v1::StoppingCriteria& s, const ModelLimits& limits) {
  if (s.has_max_tokens() && s.max_tokens() < 1) {
    return Invalid("stopping.max_tokens", "must be >= 1", s.max_tokens());
  }
  if (s.stop_size() > kMaxStopStrings) {
    return Invalid("stopping.stop", absl::StrCat("must have at most ", kMaxStopStrings, " strings"),
                   s.stop_size());
  }
  for (const std::string& stop : s.stop()) {
    if (stop.empty())
      return absl::InvalidArgumentError("stopping.stop must not contain empty strings");
    if (stop.size() > kMaxStopStringBytes) {
      return Invalid("stopping.stop",
                     absl::StrCat("strings must be at most ", kMaxStopStringBytes, " bytes"),
                     absl::StrCat(stop.size(), " bytes"));
    }
    if (!IsValidUtf8(stop))
      return absl::InvalidArgumentError("stopping.stop strings must be valid UTF-8");
  }
  if (s.stop_token_ids_size() > kMaxStopTokenIds) {
    return Invalid("stopping.stop_token_ids",
                   absl::StrCat("must have at most ", kMaxStopTokenIds, " ids"),
                   s.stop_token_ids_size());
  }
  for (int32_t id : s.stop_token_ids()) {
    auto st = CheckTokenId("stopping.stop_token_ids", id, limits);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status ValidatePromptField(const v1::GenerateRequest& request, const ModelLimits& limits) {
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      if (request.text().empty()) return absl::InvalidArgumentError("text must not be empty");
      return CheckText("text", request.text());
    case v1::GenerateRequest::kTokenIds:
      return ValidatePrompt(std::span<const int32_t>(request.token_ids().ids().data(),
                                                     request.token_ids().ids().size()),
                            EffectiveMaxTokens(request), limits);
    default:
      return absl::InvalidArgumentError("a prompt (text or token_ids) is required");
  }
}

}  // namespace

int32_t EffectiveMaxTokens(const v1::GenerateRequest& request) {
  const auto& stopping = request.stopping();
  return stopping.has_max_tokens() ? stopping.max_tokens() : kDefaultMaxTokens;
}

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request,
                                     const ModelLimits& limits) {
  if (request.request_id().size() > kMaxRequestIdBytes) {
    return Invalid("request_id", absl::StrCat("must be at most ", kMaxRequestIdBytes, " bytes"),
                   absl::StrCat(request.request_id().size(), " bytes"));
  }
  if (!IsValidUtf8(request.request_id())) {
    return absl::InvalidArgumentError("request_id is not valid UTF-8");
  }
  if (request.top_logprobs() < 0 || request.top_logprobs() > kMaxTopLogprobs) {
    return Invalid("top_logprobs", absl::StrCat("must be in [0, ", kMaxTopLogprobs, "]"),
                   request.top_logprobs());
  }
  if (request.priority() < -kMaxAbsPriority || request.priority() > kMaxAbsPriority) {
    return Invalid("priority",
                   absl::StrCat("must be in [", -kMaxAbsPriority, ", ", kMaxAbsPriority, "]"),
                   request.priority());
  }
  auto st = ValidateSampling(request.sampling(), limits);
  if (!st.ok()) return st;
  st = ValidateStopping(request.stopping(), limits);
  if (!st.ok()) return st;
  return ValidatePromptField(request, limits);
}

absl::Status ValidatePrompt(std::span<const int32_t> prompt_ids, int32_t max_tokens,
                            const ModelLimits& limits) {
  if (prompt_ids.empty()) return absl::InvalidArgumentError("the prompt must not be empty");
  for (int32_t id : prompt_ids) {
    auto st = CheckTokenId("token_ids", id, limits);
    if (!st.ok()) return st;
  }
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  if (prompt_len > limits.context_length) {
    return Invalid(
        "prompt",
        absl::StrCat("must be at most the context length (", limits.context_length, " tokens)"),
        absl::StrCat(prompt_len, " tokens"));
  }
  if (prompt_len + max_tokens > limits.context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt tokens (", prompt_len, ") + stopping.max_tokens (", max_tokens,
                     ") must be at most the context length (", limits.context_length, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTokenizeRequest(const v1::TokenizeRequest& request) {
  return CheckText("text", request.text());
}

absl::Status ValidateDetokenizeRequest(const v1::DetokenizeRequest& request,
                                       const ModelLimits& limits) {
  if (request.token_ids_size() > limits.context_length) {
    return Invalid("token_ids", absl::StrCat("must have at most ", limits.context_length, " ids"),
                   request.token_ids_size());
  }
  for (int32_t id : request.token_ids()) {
    auto st = CheckTokenId("token_ids", id, limits);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace tessera::server
