#include "server/template_chat_renderer.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

std::string TokenTextOrEmpty(const Tokenizer& tokenizer, TokenId id) {
  return id >= 0 && id < tokenizer.vocab_size() ? tokenizer.TokenText(id) : std::string();
}

// nlohmann::json sorts object keys; templates walk them in request order
// (tool parameters, for one), so they get an order-keeping copy.
nlohmann::ordered_json Ordered(const nlohmann::json& value) {
  return nlohmann::ordered_json::parse(value.dump());
}

}  // namespace

absl::StatusOr<std::unique_ptr<TemplateChatRenderer>> TemplateChatRenderer::Create(
    const std::string& source, const Tokenizer& tokenizer) {
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the chat template does not parse: ", parsed.status().message()));
  }
  return std::unique_ptr<TemplateChatRenderer>(new TemplateChatRenderer(
      *std::move(parsed), TokenTextOrEmpty(tokenizer, tokenizer.bos_id()),
      TokenTextOrEmpty(tokenizer, tokenizer.eos_id())));
}

absl::StatusOr<std::string> TemplateChatRenderer::Render(const nlohmann::json& messages,
                                                         const nlohmann::json& tools,
                                                         bool add_generation_prompt) const {
  nlohmann::ordered_json context;
  context["messages"] = Ordered(messages);
  if (!tools.is_null()) context["tools"] = Ordered(tools);
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_;
  context["eos_token"] = eos_;
  absl::StatusOr<std::string> prompt = template_.Render(context, TemplateLimits{});
  // The template's step and output limits: a request too large to render
  // never fits, so it is invalid (400), not a reason to retry (429).
  if (prompt.status().code() == absl::StatusCode::kResourceExhausted) {
    return absl::InvalidArgumentError(
        absl::StrCat("the chat cannot be rendered: ", prompt.status().message()));
  }
  return prompt;
}

void ServedChatRenderer::SetModelRenderer(std::unique_ptr<ChatRenderer> model) {
  if (model_.load() != nullptr || model == nullptr) return;
  model_owned_ = std::move(model);
  model_.store(model_owned_.get());
}

const ChatRenderer* ServedChatRenderer::Current() const {
  if (fixed_ != nullptr) return fixed_->available() ? fixed_ : nullptr;
  return model_.load();
}

absl::StatusOr<std::string> ServedChatRenderer::Render(const nlohmann::json& messages,
                                                       const nlohmann::json& tools,
                                                       bool add_generation_prompt) const {
  const ChatRenderer* current = Current();
  if (current == nullptr) return absl::FailedPreconditionError("the model has no chat template");
  return current->Render(messages, tools, add_generation_prompt);
}

}  // namespace tessera::server
