// Greedy tokens of quantized GGUF files written by llama.cpp's llama-quantize
// against llama.cpp's own tokens on the same files, committed in
// tests/data/quant_parity (see generate.py there): loading, dequantization
// and the integer kernels end to end, for every quantized type.
#include <cstdio>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/engine_harness.h"

namespace tessera {
namespace {

class QuantParity : public ::testing::TestWithParam<std::string> {};

// Log-probabilities differ: llama.cpp quantizes activations in blocks of 256
// for the K types and IQ4_XS (f32 scales) and of 32 for the others (f16
// scales), Tessera in the same blocks with f32 scales. On these peaked
// random models (logits of tens) llama.cpp's log-probabilities sit up to
// ~0.35 from the exact ones (the dequantized weights multiplied in f32),
// and Tessera's as close or closer; the kernels' own error bound is tested
// in cpu_quant_linear_test.
constexpr double kLogprobTolerance = 0.45;
// A different greedy token is accepted where llama.cpp's log-probabilities
// of the two tokens were this close.
constexpr double kTieTolerance = 0.15;

TEST_P(QuantParity, GreedyTokensMatchLlamaCpp) {
  const nlohmann::json ref = nlohmann::json::parse(
      testing::ReadFile(testing::SourcePath("tests/data/quant_parity/" + GetParam() + ".json")));
  const auto expected = ref["generated_ids"].get<std::vector<int32_t>>();
  const auto top = ref["top_logprobs"];  // [step][rank] = [id, logprob]
  EngineOptions options;
  options.model_path =
      testing::SourcePath("tests/data/quant_parity/" + ref["model_file"].get<std::string>());
  options.device = "cpu";
  options.num_threads = 2;
  // The reference ran with an f32 cache (-ctk f32 -ctv f32): with f16 keys
  // and values, Q2_K's near tie at step 2 (0.006 apart) goes the other way.
  options.kv_cache_dtype = "f32";
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto sink = std::make_shared<testing::CollectingSink>();
  GenerationRequest request = testing::GreedyRequest(
      1, ref["prompt_ids"].get<std::vector<int32_t>>(), static_cast<int32_t>(expected.size()));
  request.stopping.ignore_eos = true;
  request.sampling.logprobs = true;
  ASSERT_TRUE((*engine)->Submit(std::move(request), sink).ok());
  sink->Wait();
  ASSERT_EQ(sink->tokens.size(), expected.size());
  // Step by step while the sequences agree: the same token with about the
  // same log-probability. A different token is accepted only where llama.cpp
  // itself had a near tie between the two; the continuations differ after.
  size_t same = 0;
  for (; same < expected.size(); ++same) {
    const GeneratedToken& t = sink->tokens[same];
    if (t.token_id != expected[same]) break;
    EXPECT_NEAR(t.logprob, top[same][0][1].get<double>(), kLogprobTolerance) << "step " << same;
  }
  if (same < expected.size()) {
    const int32_t ours = sink->tokens[same].token_id;
    double ours_in_ref = -1e9;
    for (const auto& alt : top[same]) {
      if (alt[0].get<int32_t>() == ours) ours_in_ref = alt[1].get<double>();
    }
    EXPECT_LT(top[same][0][1].get<double>() - ours_in_ref, kTieTolerance)
        << GetParam() << ": token " << ours << " at step " << same << " where llama.cpp chose "
        << expected[same] << " clearly";
  }
  EXPECT_GE(same, 2u) << GetParam() << ": only " << same << " tokens agree";
  std::printf("%s: %zu of %zu greedy tokens as llama.cpp\n", GetParam().c_str(), same, expected.size());
}

INSTANTIATE_TEST_SUITE_P(Types, QuantParity,
                         ::testing::Values("q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "q3_k_m",
                                           "q2_k", "iq4_xs", "iq4_nl"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera
