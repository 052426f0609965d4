// Every architecture on the CUDA backend (f32 weights and KV cache): greedy
// tokens of the llama.cpp parity cases (tests/data/arch_parity) equal
// llama.cpp's, and the prompt's logits are within 1e-3 of the CPU backend's.
// Skips without a usable device.
#include <cstdlib>
#include <memory>

#include "gpu/gpu_test_util.h"
#include "gtest/gtest.h"
#include "testing/arch_parity.h"
#include "testing/engine_harness.h"
#include "testing/float_compare.h"

namespace tessera {
namespace {

std::unique_ptr<Engine> MakeEngine(const std::string& path, const std::string& device,
                                   int32_t context) {
  EngineOptions o;
  o.model_path = path;
  o.context_length = context;
  o.device = device;
  o.cpu_matmul = "f32";
  o.dtype = "f32";
  o.kv_cache_dtype = "f32";
  o.kv_cache_bytes = 64 << 20;
  auto engine = Engine::Create(o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

class ArchParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    TESSERA_REQUIRE_GPU();
    setenv("TESSERA_CUDA_MODULE", TESSERA_CUDA_MODULE_PATH, /*overwrite=*/0);
  }
};

TEST_P(ArchParity, CudaMatchesLlamaCppAndTheCpu) {
  const testing::ParityCase c = testing::LoadParityCase(GetParam());
  ASSERT_FALSE(c.model_path.empty()) << "tessera-make-model failed";
  auto cuda = MakeEngine(c.model_path, "cuda", c.context);
  auto cpu = MakeEngine(c.model_path, "cpu", c.context);
  ASSERT_NE(cuda, nullptr);
  ASSERT_NE(cpu, nullptr);
  auto got = cuda->DebugPromptLogits(c.prompt_ids);
  auto want = cpu->DebugPromptLogits(c.prompt_ids);
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_LE(testing::MaxAbsDiff(*got, *want), 1e-3f) << GetParam();
  auto sink = std::make_shared<testing::CollectingSink>();
  GenerationRequest request = testing::GreedyRequest(
      1, c.prompt_ids, static_cast<int32_t>(c.generated_ids.size()));
  request.stopping.ignore_eos = true;
  ASSERT_TRUE(cuda->Submit(std::move(request), sink).ok());
  sink->Wait();
  EXPECT_GE(testing::MatchingPrefix(c, sink->token_ids), 16)
      << GetParam() << ": " << ::testing::PrintToString(sink->token_ids);
}

INSTANTIATE_TEST_SUITE_P(Architectures, ArchParity,
                         ::testing::ValuesIn(testing::ParityCaseNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera
