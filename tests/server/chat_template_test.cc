// The served model's chat template: --chat-template (or the model's own)
// renders chats as Python's jinja2 does, the rendered special tokens are
// tokenized as special tokens, and a model without a template refuses chat.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/model/gguf.h"
#include "tests/testing/gzip_file.h"
#include "tests/server/test_util.h"

namespace tessera::server {
namespace {

std::string Source(const std::string& relative) {
  return std::string(TESSERA_SOURCE_DIR) + "/" + relative;
}

// A small random model with Qwen2's real vocabulary.
std::string QwenVocabModel() {
  static const std::string path = [] {
    const std::string path = Source("tests/data/vocab/ggml-vocab-qwen2.gguf");
    auto vocab = GgufFile::Open(tessera::testing::UnpackedPath(path));
    EXPECT_TRUE(vocab.ok()) << vocab.status();
    RandomModelSpec spec;
    spec.dim = 32;
    spec.layers = 1;
    spec.heads = 2;
    spec.ffn = 64;
    spec.dtype = GgmlType::kF16;
    spec.vocab_from = vocab->get();
    return tessera::testing::WriteTempModel(spec, "qwen-vocab");
  }();
  return path;
}

// The Qwen-vocabulary model served with Qwen2.5's real chat template.
ServerOptions QwenTemplateOptions() {
  ServerOptions options = testing::TestOptions();
  options.engine.model_path = QwenVocabModel();
  options.engine.chat_template_path = Source("tests/data/chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  return options;
}

v1::RenderChatRequest MultiTurn() {
  v1::RenderChatRequest request;
  for (auto [role, content] : {std::pair{"system", "You are terse."},
                               {"user", "Hi"},
                               {"assistant", "Hello. How can I help?"},
                               {"user", "Tell me a joke."}}) {
    v1::ChatMessage* m = request.add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  return request;
}

TEST(ChatTemplateTest, TemplateFileRendersAsJinja2AndTokenizesSpecialTokens) {
  std::unique_ptr<Server> server = testing::StartServer(QwenTemplateOptions());
  ASSERT_NE(server->engine(), nullptr);
  auto stub = v1::Inference::NewStub(testing::Connect(server->port()));

  // Python jinja2's rendering of the same conversation (test data).
  std::ifstream in(Source("tests/data/chat-template-expected/Qwen-Qwen2.5-7B-Instruct.json"));
  const nlohmann::json expected = nlohmann::json::parse(in);
  const std::string want = expected["conversations"]["multi_turn"]["output"];

  grpc::ClientContext render_context;
  v1::RenderChatResponse rendered;
  grpc::Status status = stub->RenderChat(&render_context, MultiTurn(), &rendered);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(rendered.prompt(), want);

  v1::ChatRequest chat;
  *chat.mutable_chat() = MultiTurn();
  chat.mutable_stopping()->set_max_tokens(1);
  grpc::ClientContext chat_context;
  v1::CompleteResponse response;
  status = stub->ChatComplete(&chat_context, chat, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  // <|im_start|> (151644) and <|im_end|> (151645) are single tokens, once
  // per occurrence in the rendered text; Qwen adds no BOS.
  int starts = 0, ends = 0;
  for (int32_t id : response.prompt_token_ids()) {
    starts += id == 151644;
    ends += id == 151645;
  }
  ASSERT_GT(response.prompt_token_ids_size(), 0);
  EXPECT_EQ(response.prompt_token_ids(0), 151644);
  EXPECT_EQ(starts, 5);
  EXPECT_EQ(ends, 4);

  grpc::ClientContext info_context;
  v1::GetModelInfoResponse info;
  ASSERT_TRUE(stub->GetModelInfo(&info_context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_TRUE(info.has_chat_template());
}

// A chat whose rendering passes the template's output limit can never be
// served: INVALID_ARGUMENT with the reason, not RESOURCE_EXHAUSTED (which
// the HTTP front answers as 429, and clients retry).
TEST(ChatTemplateTest, ChatTooLargeToRenderIsInvalid) {
  std::unique_ptr<Server> server = testing::StartServer(QwenTemplateOptions());
  ASSERT_NE(server->engine(), nullptr);
  auto stub = v1::Inference::NewStub(testing::Connect(server->port()));
  v1::RenderChatRequest request;
  v1::ChatMessage* m = request.add_messages();
  m->set_role("user");
  m->set_content(std::string((1 << 20) - 16, 'a'));
  grpc::ClientContext context;
  v1::RenderChatResponse rendered;
  grpc::Status status = stub->RenderChat(&context, request, &rendered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("cannot be rendered"), std::string::npos)
      << status.error_message();
}

TEST(ChatTemplateTest, ModelWithoutTemplateRefusesChat) {
  std::unique_ptr<Server> server = testing::StartServer();
  auto stub = v1::Inference::NewStub(testing::Connect(server->port()));
  grpc::ClientContext context;
  v1::RenderChatResponse rendered;
  EXPECT_EQ(stub->RenderChat(&context, MultiTurn(), &rendered).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  grpc::ClientContext info_context;
  v1::GetModelInfoResponse info;
  ASSERT_TRUE(stub->GetModelInfo(&info_context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_FALSE(info.has_chat_template());
}

TEST(ChatTemplateTest, TemplateThatDoesNotParseFailsTheLoad) {
  const std::string path = ::testing::TempDir() + "/bad-template.jinja";
  std::ofstream(path) << "{% for m in messages %}{{ m.content }";
  ServerOptions options = testing::TestOptions();
  options.engine.chat_template_path = path;
  auto server = std::make_unique<Server>();
  ASSERT_TRUE(server->Start(options).ok());
  absl::Status status = server->LoadModel();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("chat template"), std::string::npos) << status;
}

}  // namespace
}  // namespace tessera::server
