// Turns a chat request's messages into the model's prompt text (its chat
// template). The HTTP front's /v1/chat/completions and /apply-template use
// the renderer the server is given; without one they answer 400.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace tessera {
class Tokenizer;
}

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
  // False while there is no template to render with (before the model has
  // loaded, or for a model without one): chat calls are refused then.
  virtual bool available() const { return true; }
};

// The token ids of a rendered chat prompt: the template wrote the special
// tokens as text, so they are parsed as special tokens; BOS is added only
// when the model wants one and the template did not write it.
std::vector<int32_t> TokenizeChatPrompt(const Tokenizer& tokenizer, std::string_view prompt);

// True when `chat` can render now.
inline bool CanRender(const ChatRenderer* chat) { return chat != nullptr && chat->available(); }

}  // namespace tessera::server
