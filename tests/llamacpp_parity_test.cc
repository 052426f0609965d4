// Greedy tokens of small random-weight models of every architecture against
// llama.cpp's, committed in tests/data/arch_parity (see generate.py there).
// Each case rebuilds its model with tessera-make-model and the exact flags
// that produced llama.cpp's reference, then generates with the engine.
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/format/hf_model.h"
#include "engine/format/hf_writer.h"
#include "gtest/gtest.h"
#include "testing/arch_parity.h"
#include "testing/engine_harness.h"
#include "testing/hf_folder.h"

namespace tessera {
namespace {

class LlamaCppParity : public ::testing::TestWithParam<std::string> {};

std::vector<int32_t> Greedy(const testing::ParityCase& c, const std::string& model_path) {
  EngineOptions options;
  options.model_path = model_path;
  options.device = "cpu";
  options.num_threads = 2;
  options.context_length = c.context;
  auto engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  auto sink = std::make_shared<testing::CollectingSink>();
  GenerationRequest request = testing::GreedyRequest(
      1, c.prompt_ids, static_cast<int32_t>(c.generated_ids.size()));
  request.stopping.ignore_eos = true;
  EXPECT_TRUE((*engine)->Submit(std::move(request), sink).ok());
  sink->Wait();
  return sink->token_ids;
}

TEST_P(LlamaCppParity, GreedyTokensMatchLlamaCpp) {
  const testing::ParityCase c = testing::LoadParityCase(GetParam());
  ASSERT_FALSE(c.model_path.empty()) << "tessera-make-model failed";
  const std::vector<int32_t> got = Greedy(c, c.model_path);
  EXPECT_GE(testing::MatchingPrefix(c, got), 16)
      << GetParam() << ": " << ::testing::PrintToString(got) << " against llama.cpp's "
      << ::testing::PrintToString(c.generated_ids);
}

// The same weights as a Hugging Face folder (config.json as transformers
// writes it, read back as convert_hf_to_gguf.py would convert it): the same
// tokens as llama.cpp's.
TEST_P(LlamaCppParity, HuggingFaceFolderMatchesLlamaCpp) {
  const testing::ParityCase c = testing::LoadParityCase(GetParam());
  ASSERT_FALSE(c.model_path.empty()) << "tessera-make-model failed";
  auto gguf = GgufFile::Open(c.model_path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  testing::TempDir dir;
  ASSERT_TRUE(WriteHfFolder(**gguf, dir / "model", {}).ok());
  auto view = OpenHfWeights(dir / "model");
  ASSERT_TRUE(view.ok()) << view.status();
  const std::vector<int32_t> got = Greedy(c, testing::WriteView(**view, **gguf, dir / "v.gguf"));
  EXPECT_GE(testing::MatchingPrefix(c, got), 16)
      << GetParam() << ": " << ::testing::PrintToString(got);
}

INSTANTIATE_TEST_SUITE_P(Architectures, LlamaCppParity,
                         ::testing::ValuesIn(testing::ParityCaseNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera
