// The whole model on the CUDA backend (loaded as tessera-server loads it,
// from the module) against the CPU backend, on the bundled stories260K.gguf.
//  - f32 weights and KV cache (--dtype f32): logits within 1e-3 absolute of
//    the CPU's (logits are of magnitude ~10; the products differ only in
//    accumulation order), and greedy tokens identical to the CPU's and to
//    the independent reference, alone and with eight requests batched.
//  - f16 weights and KV cache (--dtype f16): logits within 0.25 absolute
//    of the CPU's f32 run, and the first greedy token identical.
// Skips without a usable device; any failure to create the CUDA engine on a
// machine with one fails the test.
#include <cmath>
#include <cstdlib>
#include <memory>

#include "gpu/gpu_test_util.h"
#include "gtest/gtest.h"
#include "testing/engine_harness.h"
#include "testing/float_compare.h"
#include "testing/golden.h"

namespace tessera {
namespace {

using testing::CollectingSink;
using testing::GreedyRequest;

using testing::Golden;
using testing::LoadGolden;
using testing::MaxAbsDiff;

bool NoDevice(const absl::Status& s) {
  const std::string m(s.message());
  return m.find("cudaGetDeviceCount failed") != std::string::npos ||
         m.find("no CUDA devices") != std::string::npos;
}

std::unique_ptr<Engine> MakeEngine(const std::string& device, const std::string& dtype,
                                   const std::string& kv_dtype, std::string* skip) {
  EngineOptions o;
  o.model_path = testing::SourcePath("models/stories260K.gguf");
  o.device = device;
  o.cpu_matmul = "f32";
  o.dtype = dtype;
  o.kv_cache_dtype = kv_dtype;
  o.kv_cache_bytes = 64 << 20;
  auto engine = Engine::Create(o);
  if (!engine.ok() && NoDevice(engine.status())) {
    *skip = std::string(engine.status().message());
    return nullptr;
  }
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

std::vector<int32_t> Greedy(Engine& engine, const std::vector<int32_t>& prompt, int32_t n) {
  auto sink = std::make_shared<CollectingSink>();
  EXPECT_TRUE(engine.Submit(GreedyRequest(1, prompt, n), sink).ok());
  sink->Wait();
  return sink->token_ids;
}


class ModelParity : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSERA_REQUIRE_GPU();
    // The module next to tessera-server in this build, unless ctest says.
    setenv("TESSERA_CUDA_MODULE", TESSERA_CUDA_MODULE_PATH, /*overwrite=*/0);
    std::string skip;
    cuda_ = MakeEngine("cuda", "f32", "f32", &skip);
    if (!skip.empty()) GTEST_SKIP() << "no usable GPU: " << skip;
    ASSERT_NE(cuda_, nullptr);
    ASSERT_EQ(cuda_->model_info().device, "cuda");
    cpu_ = MakeEngine("cpu", "f32", "f32", &skip);
    ASSERT_NE(cpu_, nullptr);
  }
  std::unique_ptr<Engine> cuda_, cpu_;
};

TEST_F(ModelParity, F32LogitsMatchTheCpu) {
  const Golden golden = LoadGolden();
  std::vector<int32_t> prompt = golden.prompt_ids;
  prompt.insert(prompt.end(), golden.generated_ids.begin(), golden.generated_ids.end());
  for (size_t len : {size_t(1), size_t(5), size_t(40), prompt.size()}) {
    const std::vector<int32_t> p(prompt.begin(), prompt.begin() + len);
    auto want = cpu_->DebugPromptLogits(p);
    auto got = cuda_->DebugPromptLogits(p);
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_LE(MaxAbsDiff(*got, *want), 1e-3f) << "prompt of " << len << " tokens";
  }
}

TEST_F(ModelParity, F32GreedyTokensMatchTheCpuAndTheReference) {
  const Golden golden = LoadGolden();
  const std::vector<int32_t> tokens = Greedy(*cuda_, golden.prompt_ids, 64);
  EXPECT_EQ(tokens, Greedy(*cpu_, golden.prompt_ids, 64));
  EXPECT_EQ(tokens, golden.generated_ids);
}

TEST_F(ModelParity, BatchedGreedyTokensMatchTheCpu) {
  const std::vector<std::string> texts = {"Once upon a time",
                                          "The cat",
                                          "Lily and Ben went",
                                          "One day",
                                          "A big red ball",
                                          "Tom was sad because",
                                          "She",
                                          "The sun was shining and the birds"};
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (size_t i = 0; i < texts.size(); ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    const std::vector<int32_t> ids = cuda_->tokenizer().Encode(texts[i], true);
    ASSERT_TRUE(cuda_->Submit(GreedyRequest(100 + i, ids, 48), sinks.back()).ok());
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    sinks[i]->Wait();
    EXPECT_EQ(sinks[i]->token_ids, Greedy(*cpu_, cpu_->tokenizer().Encode(texts[i], true), 48))
        << texts[i];
  }
}

TEST_F(ModelParity, F16WeightsAndCacheStayClose) {
  std::string skip;
  auto half = MakeEngine("cuda", "f16", "f16", &skip);
  ASSERT_NE(half, nullptr) << skip;
  const Golden golden = LoadGolden();
  auto want = cpu_->DebugPromptLogits(golden.prompt_ids);
  auto got = half->DebugPromptLogits(golden.prompt_ids);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_LE(MaxAbsDiff(*got, *want), 0.25f);
  EXPECT_EQ(Greedy(*half, golden.prompt_ids, 1), Greedy(*cpu_, golden.prompt_ids, 1));
}

}  // namespace
}  // namespace tessera
