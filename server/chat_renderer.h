// Turns a chat request's messages into the model's prompt text (its chat
// template). The HTTP front's /v1/chat/completions and /apply-template use
// the renderer the server is given; without one they answer 400.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace tessera::server {

class ChatRenderer {
 public:
  virtual ~ChatRenderer() = default;
  // `messages`: the request's "messages" array; `tools`: its "tools" (null
  // when absent); `add_generation_prompt`: the request's field (default
  // true). Errors are INVALID_ARGUMENT with a message for the client.
  virtual absl::StatusOr<std::string> Render(const nlohmann::json& messages,
                                             const nlohmann::json& tools,
                                             bool add_generation_prompt) const = 0;
};

}  // namespace tessera::server
