// A ChatML-style renderer for tests of the chat endpoints: each message as
// "<|im_start|>ROLE\nCONTENT<|im_end|>\n", then "<|im_start|>assistant\n"
// when a generation prompt is asked for. Content is a string or a list of
// {"type": "text", "text": ...} parts. Not a real model's template.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "server/chat_renderer.h"

namespace tessera::server::testing {

class ChatMlRenderer : public ChatRenderer {
 public:
  absl::StatusOr<std::string> Render(const nlohmann::json& messages, const nlohmann::json& tools,
                                     bool add_generation_prompt) const override {
    std::string out;
    for (const nlohmann::json& message : messages) {
      absl::StatusOr<std::string> content = Content(message);
      if (!content.ok()) return content.status();
      absl::StrAppend(&out, "<|im_start|>", message.at("role").get<std::string>(), "\n", *content,
                      "<|im_end|>\n");
    }
    if (add_generation_prompt) absl::StrAppend(&out, "<|im_start|>assistant\n");
    return out;
  }

 private:
  static absl::StatusOr<std::string> Content(const nlohmann::json& message) {
    auto it = message.find("content");
    if (it == message.end() || it->is_null()) return std::string();
    if (it->is_string()) return it->get<std::string>();
    if (!it->is_array()) {
      return absl::InvalidArgumentError("message content must be a string or a list of parts");
    }
    std::string text;
    for (const nlohmann::json& part : *it) {
      auto type = part.find("type");
      auto value = part.find("text");
      if (!part.is_object() || type == part.end() || *type != "text" || value == part.end() ||
          !value->is_string()) {
        return absl::InvalidArgumentError("only text content parts are supported");
      }
      text += value->get<std::string>();
    }
    return text;
  }
};

}  // namespace tessera::server::testing
