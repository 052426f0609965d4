// Greedy tokens of small random-weight models of every architecture against
// llama.cpp's, committed in tests/data/arch_parity (see generate.py there).
// Each case rebuilds its model with tessera-make-model and the exact flags
// that produced llama.cpp's reference, then generates with the engine.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/engine_harness.h"
#include "testing/temp_model.h"

namespace tessera {
namespace {

std::string MakeModelBinary() {
  return std::string(TESSERA_BINARY_DIR) + "/tools/tessera-make-model";
}

class LlamaCppParity : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppParity, GreedyTokensMatchLlamaCpp) {
  const std::string name = GetParam();
  const nlohmann::json ref = nlohmann::json::parse(
      testing::ReadFile(testing::SourcePath("tests/data/arch_parity/" + name + ".json")));
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera-parity-" + name + "-" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  testing::ProcessTempFiles().Add(path);
  std::string command = MakeModelBinary();
  std::string previous;
  for (const auto& arg : ref["make_model_args"]) {
    // The vocab path is relative to the repository root.
    const std::string a =
        previous == "--vocab-from" ? testing::SourcePath(arg.get<std::string>()) : arg.get<std::string>();
    command += " '" + a + "'";
    previous = arg.get<std::string>();
  }
  command += " --out '" + path + "' > /dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  EngineOptions options;
  options.model_path = path;
  options.device = "cpu";
  options.num_threads = 2;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<int32_t> prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
  const std::vector<int32_t> want = ref["generated_ids"].get<std::vector<int32_t>>();
  auto sink = std::make_shared<testing::CollectingSink>();
  GenerationRequest request =
      testing::GreedyRequest(1, prompt, static_cast<int32_t>(want.size()));
  request.stopping.ignore_eos = true;
  ASSERT_TRUE((*engine)->Submit(std::move(request), sink).ok());
  sink->Wait();
  EXPECT_EQ(sink->token_ids, want) << name;
}

INSTANTIATE_TEST_SUITE_P(Architectures, LlamaCppParity,
                         ::testing::Values("llama3", "llama_tied", "qwen2", "qwen3", "phi3",
                                           "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera
