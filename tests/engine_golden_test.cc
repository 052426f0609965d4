// The engine against golden outputs computed by an independent
// implementation of the llama architecture on the bundled stories260K model.
#include <cmath>
#include <memory>

#include "gtest/gtest.h"
#include "testing/engine_harness.h"
#include "testing/golden.h"

namespace tessera {
namespace {

using testing::CollectingSink;
using testing::GreedyRequest;

using testing::Golden;
using testing::LoadGolden;

std::unique_ptr<Engine> MakeEngine(int threads) {
  EngineOptions options;
  options.model_path = testing::SourcePath("models/stories260K.gguf");
  options.device = "cpu";
  options.num_threads = threads;
  auto engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

TEST(EngineGolden, FirstStepLogitsMatchReference) {
  const Golden golden = LoadGolden();
  auto engine = MakeEngine(2);
  ASSERT_NE(engine, nullptr);
  auto logits = engine->DebugPromptLogits(golden.prompt_ids);
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->size(), golden.step0_logits.size());
  float max_diff = 0.0f;
  for (size_t i = 0; i < logits->size(); ++i) {
    max_diff = std::max(max_diff, std::fabs((*logits)[i] - golden.step0_logits[i]));
  }
  EXPECT_LT(max_diff, 1e-3f);
}

TEST(EngineGolden, PromptTokenizesToReferenceIds) {
  const Golden golden = LoadGolden();
  auto engine = MakeEngine(1);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->tokenizer().Encode("Once upon a time", true), golden.prompt_ids);
}

class EngineGoldenThreads : public ::testing::TestWithParam<int> {};

TEST_P(EngineGoldenThreads, Greedy64TokensMatchReference) {
  const Golden golden = LoadGolden();
  auto engine = MakeEngine(GetParam());
  ASSERT_NE(engine, nullptr);
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->Submit(GreedyRequest(1, golden.prompt_ids, 64), sink).ok());
  sink->Wait();
  EXPECT_EQ(sink->token_ids, golden.generated_ids);
  EXPECT_EQ(sink->text, golden.generated_text);
  EXPECT_EQ(sink->finish.reason, FinishReason::kLength);
  EXPECT_EQ(sink->finish.prompt_tokens, 5);
  EXPECT_EQ(sink->finish.completion_tokens, 64);
}

INSTANTIATE_TEST_SUITE_P(Threads, EngineGoldenThreads, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace tessera
