#include "server/chat_calls.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "server/http/json_body.h"
#include "server/validation.h"

namespace tessera::server {
namespace {

class Finished : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit Finished(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

absl::StatusOr<std::string> RenderChatPrompt(const v1::RenderChatRequest& request,
                                             const ChatRenderer* chat) {
  if (!CanRender(chat)) {
    return absl::FailedPreconditionError("the model has no chat template");
  }
  if (request.messages_size() == 0) {
    return absl::InvalidArgumentError("chat.messages must not be empty");
  }
  nlohmann::json messages = nlohmann::json::array();
  size_t bytes = 0;
  for (const v1::ChatMessage& message : request.messages()) {
    if (message.role().empty()) {
      return absl::InvalidArgumentError("chat.messages: every message needs a role");
    }
    bytes += message.content().size();
    messages.push_back({{"role", message.role()}, {"content", message.content()}});
  }
  if (bytes > kMaxTextBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat.messages must hold at most ", kMaxTextBytes, " bytes of content"));
  }
  nlohmann::json tools;
  if (!request.tools_json().empty()) {
    absl::StatusOr<nlohmann::json> parsed = http::ParseJsonBody(request.tools_json());
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat.tools_json: ", parsed.status().message()));
    }
    if (!parsed->is_array()) return absl::InvalidArgumentError("chat.tools_json must be an array");
    tools = *std::move(parsed);
  }
  const bool add = request.has_add_generation_prompt() ? request.add_generation_prompt() : true;
  return chat->Render(messages, tools, add);
}

std::vector<int32_t> TokenizeChatPrompt(const Tokenizer& tokenizer, std::string_view prompt) {
  std::vector<TokenId> ids = tokenizer.Encode(prompt, EncodeOptions{.add_bos = false,
                                                                    .parse_special = true});
  const TokenId bos = tokenizer.bos_id();
  if (tokenizer.add_bos() && bos >= 0 && (ids.empty() || ids.front() != bos)) {
    ids.insert(ids.begin(), bos);
  }
  return ids;
}

absl::StatusOr<grpc::ByteBuffer> ChatToGenerateRequest(const grpc::ByteBuffer& raw,
                                                       const ChatRenderer* chat,
                                                       const Tokenizer& tokenizer) {
  v1::ChatRequest request;
  absl::Status status = ParseMessage(raw, &request);
  if (!status.ok()) return status;
  absl::StatusOr<std::string> prompt = RenderChatPrompt(request.chat(), chat);
  if (!prompt.ok()) return prompt.status();
  if (prompt->empty()) return absl::InvalidArgumentError("the chat rendered to an empty prompt");
  v1::GenerateRequest generate;
  const std::vector<int32_t> ids = TokenizeChatPrompt(tokenizer, *prompt);
  generate.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  *generate.mutable_sampling() = request.sampling();
  *generate.mutable_stopping() = request.stopping();
  generate.set_top_logprobs(request.top_logprobs());
  generate.set_logprobs(request.logprobs());
  generate.set_request_id(request.request_id());
  return SerializeMessage(generate);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* FinishedWriter(const grpc::Status& status) {
  return new Finished(status);
}

}  // namespace tessera::server
