// Hugging Face folders served by the engine as a user gives them: the
// folder's own tokenizer.json, and the vocabulary sizes published folders
// really have, where config.json's vocab_size and the tokenizer disagree
// (Qwen and Phi-3 pad the model past the tokenizer; Gemma 3's tokenizer has
// one id past the model).
#include <fstream>
#include <set>

#include "engine/engine.h"
#include "engine/format/hf_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "testing/engine_harness.h"
#include "testing/gzip_file.h"
#include "testing/hf_folder.h"

namespace tessera {
namespace {

class HfEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string json =
        testing::ReadGzip(testing::SourcePath("tests/data/tokenizers/tiny-spm/tokenizer.json.gz"));
    ASSERT_FALSE(json.empty());
    tokenizer_json_ = dir_ / "tokenizer.json";
    std::ofstream(tokenizer_json_) << json;
    auto tokenizer = Tokenizer::FromHuggingFace(json, "{}");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_vocab_ = (*tokenizer)->vocab_size();
  }

  // A random llama folder with `vocab` model ids and the tiny tokenizer.
  std::string Folder(int32_t vocab) {
    RandomModelSpec spec = testing::SmallLlama(64, 4, 2);
    spec.vocab_size = static_cast<uint32_t>(vocab);
    spec.output_std = 1.0f;  // logits spread widely: greedy picks vary
    auto gguf = testing::RandomGguf(spec);
    const std::string folder = dir_ / ("model-" + std::to_string(vocab));
    HfWriteOptions options;
    options.tokenizer_json = tokenizer_json_;
    EXPECT_TRUE(WriteHfFolder(*gguf, folder, options).ok());
    return folder;
  }

  static std::unique_ptr<Engine> Open(const std::string& folder) {
    EngineOptions options;
    options.model_path = folder;
    options.device = "cpu";
    options.num_threads = 1;
    auto engine = Engine::Create(options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  static std::vector<int32_t> Greedy(Engine& engine, std::vector<int32_t> prompt, int n) {
    GenerationRequest request = testing::GreedyRequest(1, std::move(prompt), n);
    request.stopping.ignore_eos = true;
    auto sink = std::make_shared<testing::CollectingSink>();
    EXPECT_TRUE(engine.Submit(std::move(request), sink).ok());
    sink->Wait();
    return sink->token_ids;
  }

  testing::TempDir dir_;
  std::string tokenizer_json_;
  int32_t tokenizer_vocab_ = 0;
};

TEST_F(HfEngineTest, ServesAFolderWithItsOwnTokenizerJson) {
  auto engine = Open(Folder(tokenizer_vocab_));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->model_info().format, "hf");
  EXPECT_EQ(engine->model_info().vocab_size, tokenizer_vocab_);
  const std::vector<int32_t> prompt = engine->tokenizer().Encode("Hello world, hello!", true);
  ASSERT_GT(prompt.size(), 2u);
  const std::vector<int32_t> out = Greedy(*engine, prompt, 24);
  ASSERT_EQ(out.size(), 24u);
  EXPECT_GT(std::set<int32_t>(out.begin(), out.end()).size(), 2u);
}

// Three quarters of the model's ids have no token: greedy decoding over the
// whole row would pick them; only ids the tokenizer knows are sampled.
TEST_F(HfEngineTest, ModelPaddedPastItsTokenizerSamplesOnlyTokenizerIds) {
  auto engine = Open(Folder(4 * tokenizer_vocab_));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->model_info().vocab_size, tokenizer_vocab_);
  const std::vector<int32_t> prompt = engine->tokenizer().Encode("Hello world, hello!", true);
  const std::vector<int32_t> out = Greedy(*engine, prompt, 32);
  ASSERT_EQ(out.size(), 32u);
  for (int32_t id : out) EXPECT_LT(id, tokenizer_vocab_);
  auto logits = engine->DebugPromptLogits(prompt);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->size(), static_cast<size_t>(tokenizer_vocab_));
}

// The tokenizer's last two ids (added tokens) are past the model: text that
// encodes to them is refused, not looked up past the embedding table.
TEST_F(HfEngineTest, TokenizerIdsPastTheModelAreRefusedInPrompts) {
  const int32_t model_vocab = tokenizer_vocab_ - 2;
  auto engine = Open(Folder(model_vocab));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->model_info().vocab_size, model_vocab);
  const std::string past = engine->tokenizer().TokenText(tokenizer_vocab_ - 1);
  const std::vector<int32_t> prompt =
      engine->tokenizer().Encode("a " + past + " b", EncodeOptions{true, true});
  ASSERT_NE(std::find(prompt.begin(), prompt.end(), tokenizer_vocab_ - 1), prompt.end());
  auto sink = std::make_shared<testing::CollectingSink>();
  const absl::Status refused =
      engine->Submit(testing::GreedyRequest(1, prompt, 4), sink);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  const std::vector<int32_t> out =
      Greedy(*engine, engine->tokenizer().Encode("Hello world", true), 32);
  ASSERT_EQ(out.size(), 32u);
  for (int32_t id : out) EXPECT_LT(id, model_vocab);
}

}  // namespace
}  // namespace tessera
