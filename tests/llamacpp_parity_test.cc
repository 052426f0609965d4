// Greedy tokens of small random-weight models of every architecture against
// llama.cpp's, committed in tests/data/arch_parity (see generate.py there).
// Each case rebuilds its model with tessera-make-model and the exact flags
// that produced llama.cpp's reference, then generates with the engine.
#include <memory>
#include <string>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "testing/arch_parity.h"
#include "testing/engine_harness.h"

namespace tessera {
namespace {

class LlamaCppParity : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppParity, GreedyTokensMatchLlamaCpp) {
  const testing::ParityCase c = testing::LoadParityCase(GetParam());
  ASSERT_FALSE(c.model_path.empty()) << "tessera-make-model failed";
  EngineOptions options;
  options.model_path = c.model_path;
  options.device = "cpu";
  options.num_threads = 2;
  options.context_length = c.context;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto sink = std::make_shared<testing::CollectingSink>();
  GenerationRequest request = testing::GreedyRequest(
      1, c.prompt_ids, static_cast<int32_t>(c.generated_ids.size()));
  request.stopping.ignore_eos = true;
  ASSERT_TRUE((*engine)->Submit(std::move(request), sink).ok());
  sink->Wait();
  const int64_t matching = testing::MatchingPrefix(c, sink->token_ids);
  EXPECT_GE(matching, 16) << GetParam() << ": " << ::testing::PrintToString(sink->token_ids)
                          << " against llama.cpp's " << ::testing::PrintToString(c.generated_ids);
}

INSTANTIATE_TEST_SUITE_P(Architectures, LlamaCppParity,
                         ::testing::ValuesIn(testing::ParityCaseNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera
