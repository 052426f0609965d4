// Checks of client requests against the API's documented limits and the
// loaded model. Every failure is INVALID_ARGUMENT with a message naming the
// field; nothing here aborts on bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::server {

inline constexpr size_t kMaxTextBytes = size_t{1} << 20;  // 1 MiB
inline constexpr int kMaxStopStrings = 8;
inline constexpr size_t kMaxStopStringBytes = 256;
inline constexpr int kMaxStopTokenIds = 32;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr size_t kMaxRequestIdBytes = 128;
inline constexpr float kMaxTemperature = 100.0f;
inline constexpr float kMaxRepetitionPenalty = 10.0f;
inline constexpr float kMaxAbsPenalty = 2.0f;  // presence and frequency
inline constexpr int32_t kDefaultMaxTokens = 16;
inline constexpr int32_t kMaxAbsPriority = 1000000;

// What validation needs to know about the model.
struct ModelLimits {
  int32_t vocab_size = 0;
  int32_t context_length = 0;
};

// The request's max_tokens, or the documented default when unset.
int32_t EffectiveMaxTokens(const v1::GenerateRequest& request);

// Checks every field that can be checked before tokenizing: the prompt's
// presence, text encoding and size, token ids, sampling parameters, stopping
// criteria, top_logprobs and request_id.
absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, const ModelLimits& limits);

// Checks the (tokenized) prompt: non-empty, ids in vocabulary, and
// prompt + max_tokens within the context.
absl::Status ValidatePrompt(std::span<const int32_t> prompt_ids, int32_t max_tokens,
                            const ModelLimits& limits);

absl::Status ValidateTokenizeRequest(const v1::TokenizeRequest& request);
absl::Status ValidateDetokenizeRequest(const v1::DetokenizeRequest& request,
                                       const ModelLimits& limits);

}  // namespace tessera::server
