// The ChatRenderer of a served model: its own chat template (or the
// --chat-template file), rendered as Hugging Face's apply_chat_template does,
// with the tokenizer's BOS and EOS texts.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/template/chat_template.h"
#include "server/chat_renderer.h"

namespace tessera {
class Tokenizer;
}

namespace tessera::server {

class TemplateChatRenderer final : public ChatRenderer {
 public:
  // Parses `source`; a template that does not parse is INVALID_ARGUMENT with
  // the parser's message (the model does not load).
  static absl::StatusOr<std::unique_ptr<TemplateChatRenderer>> Create(const std::string& source,
                                                                       const Tokenizer& tokenizer);

  absl::StatusOr<std::string> Render(const nlohmann::json& messages, const nlohmann::json& tools,
                                     bool add_generation_prompt) const override;

 private:
  TemplateChatRenderer(ChatTemplate chat_template, std::string bos, std::string eos)
      : template_(std::move(chat_template)), bos_(std::move(bos)), eos_(std::move(eos)) {}

  ChatTemplate template_;
  std::string bos_;
  std::string eos_;
};

// The renderer both fronts are given: a fixed one (tests, embedders) when
// set, else the loaded model's template once SetModelRenderer has run.
class ServedChatRenderer final : public ChatRenderer {
 public:
  explicit ServedChatRenderer(const ChatRenderer* fixed) : fixed_(fixed) {}
  // Called once, when the model has loaded; `model` may be null (no template).
  void SetModelRenderer(std::unique_ptr<ChatRenderer> model);

  absl::StatusOr<std::string> Render(const nlohmann::json& messages, const nlohmann::json& tools,
                                     bool add_generation_prompt) const override;
  bool available() const override { return Current() != nullptr; }

 private:
  const ChatRenderer* Current() const;

  const ChatRenderer* const fixed_;
  std::unique_ptr<ChatRenderer> model_owned_;  // written once, before model_ is published
  std::atomic<const ChatRenderer*> model_{nullptr};
};

}  // namespace tessera::server
