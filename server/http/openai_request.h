// OpenAI request bodies (/v1/completions, /v1/chat/completions) turned into
// the gRPC API's GenerateRequest, so that both fronts share one validation
// (server/validation.h). Unknown fields are ignored; a known field of the
// wrong type is INVALID_ARGUMENT naming it (see InvalidParam).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::server::http {

inline constexpr int kMaxChoices = 16;  // largest `n`

enum class Endpoint { kCompletions, kChat };

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  // Prompt (text or token ids) and parameters; not validated yet. Chat
  // requests get their prompt from the renderer (see `messages`).
  v1::GenerateRequest proto;
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool max_tokens_set = false;
  // Chat: the request's messages and tools, for the ChatRenderer.
  nlohmann::json messages;
  nlohmann::json tools;
  bool add_generation_prompt = true;
};

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(const nlohmann::json& body);
absl::StatusOr<OpenAiRequest> ParseChatRequest(const nlohmann::json& body);

// /apply-template's body: messages, tools, add_generation_prompt.
absl::StatusOr<OpenAiRequest> ParseTemplateRequest(const nlohmann::json& body);

}  // namespace tessera::server::http
