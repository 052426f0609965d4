// Prefix caching and priority scheduling on the real engine (stories260K):
// a request's tokens are bit-identical whether its prompt's K/V came from
// the cache or were computed, through chunked prefill, preemption and
// priority preemption, greedy and seeded.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "testing/engine_harness.h"

namespace tessera {
namespace {

using testing::CollectingSink;

// Long enough for several 16-token blocks.
const char kSystem[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her friends. One day, her mom said";
const char* kQuestions[] = {" they should go to the store.", " it was time to eat.",
                            " the sun was hot.", " a big dog was coming.",
                            " Tom had a new toy.", " it would rain soon.",
                            " the birds were singing.", " she could have a cake."};

struct Setup {
  bool cache = true;
  int64_t kv_bytes = 0;
  int32_t max_seqs = 64;
  int32_t max_tokens = 2048;
  std::string policy = "fcfs";
  int32_t step_delay_ms = 0;  // every step sleeps (a slower model)
};

std::unique_ptr<Engine> MakeEngine(const Setup& setup) {
  EngineOptions options;
  options.model_path = testing::SourcePath("models/stories260K.gguf");
  options.device = "cpu";
  options.num_threads = 2;
  options.kv_cache_bytes = setup.kv_bytes;
  options.max_num_seqs = setup.max_seqs;
  options.max_batched_tokens = setup.max_tokens;
  options.enable_prefix_caching = setup.cache;
  options.scheduling_policy = setup.policy;
  options.step_delay_for_testing_ms = setup.step_delay_ms;
  auto engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

GenerationRequest Request(Engine& engine, int i, int max_tokens, bool seeded,
                          int32_t priority = 0) {
  std::vector<int32_t> prompt =
      engine.tokenizer().Encode(std::string(kSystem) + kQuestions[i % 8], true);
  GenerationRequest r = testing::GreedyRequest(i + 1, std::move(prompt), max_tokens);
  r.stopping.ignore_eos = true;
  r.priority = priority;
  if (seeded) {
    r.sampling.temperature = 0.9f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 500 + i;
    r.sampling.has_seed = true;
  }
  return r;
}

struct Outcome {
  std::vector<int32_t> tokens;
  int32_t cached = 0;
};

std::vector<Outcome> Collect(std::vector<std::shared_ptr<CollectingSink>>& sinks) {
  std::vector<Outcome> out;
  for (auto& s : sinks) {
    s->Wait();
    out.push_back({s->token_ids, s->finish.cached_prompt_tokens});
  }
  return out;
}

std::vector<Outcome> RunConcurrently(Engine& engine, int n, int max_tokens, bool seeded) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < n; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    EXPECT_TRUE(engine.Submit(Request(engine, i, max_tokens, seeded), sinks.back()).ok());
  }
  return Collect(sinks);
}

Outcome RunAlone(Engine& engine, const GenerationRequest& request) {
  std::vector<std::shared_ptr<CollectingSink>> sinks{std::make_shared<CollectingSink>()};
  EXPECT_TRUE(engine.Submit(request, sinks[0]).ok());
  return Collect(sinks)[0];
}

// Each request alone on an engine without the cache: the reference.
std::vector<std::vector<int32_t>> Reference(int n, int max_tokens, bool seeded) {
  auto engine = MakeEngine({.cache = false});
  std::vector<std::vector<int32_t>> out;
  if (engine == nullptr) return out;
  for (int i = 0; i < n; ++i) {
    out.push_back(RunAlone(*engine, Request(*engine, i, max_tokens, seeded)).tokens);
  }
  EXPECT_EQ(engine->Stats().kv_cache_cached_blocks, 0);
  return out;
}

class CachedVsComputed : public ::testing::TestWithParam<bool> {};

TEST_P(CachedVsComputed, SameTokensAloneAndConcurrent) {
  const bool seeded = GetParam();
  const auto expected = Reference(8, 40, seeded);
  ASSERT_EQ(expected.size(), 8u);
  auto engine = MakeEngine({});
  ASSERT_NE(engine, nullptr);
  // The first request computes the shared prefix; the others find it.
  const Outcome first = RunAlone(*engine, Request(*engine, 0, 40, seeded));
  EXPECT_EQ(first.cached, 0);
  EXPECT_EQ(first.tokens, expected[0]);
  EXPECT_GT(engine->Stats().kv_cache_cached_blocks, 0);
  auto got = RunConcurrently(*engine, 8, 40, seeded);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i].tokens, expected[i]) << "request " << i;
    EXPECT_GE(got[i].cached, 16) << "request " << i;
  }
  // The same prompt again: cached except what the last token needs.
  const Outcome again = RunAlone(*engine, Request(*engine, 3, 40, seeded));
  EXPECT_EQ(again.tokens, expected[3]);
  const int32_t prompt_len =
      static_cast<int32_t>(Request(*engine, 3, 40, seeded).prompt_ids.size());
  EXPECT_EQ(again.cached, (prompt_len - 1) / 16 * 16);
}

INSTANTIATE_TEST_SUITE_P(GreedyAndSeeded, CachedVsComputed, ::testing::Bool());

TEST(PrefixCacheEngine, ChunkedPrefillOverCachedBlocks) {
  const auto expected = Reference(6, 24, /*seeded=*/false);
  ASSERT_EQ(expected.size(), 6u);
  for (int32_t budget : {5, 16, 23}) {
    auto engine = MakeEngine({.max_tokens = budget});
    ASSERT_NE(engine, nullptr);
    RunAlone(*engine, Request(*engine, 0, 24, false));
    auto got = RunConcurrently(*engine, 6, 24, false);
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(got[i].tokens, expected[i]) << "budget " << budget << " request " << i;
      EXPECT_GT(got[i].cached, 0);
    }
  }
}

// Generated tokens' blocks are cached too: a second turn that resends the
// first turn's prompt and answer computes only its new part.
TEST(PrefixCacheEngine, SecondTurnReusesTheFirstTurnsAnswer) {
  auto plain = MakeEngine({.cache = false});
  auto cached = MakeEngine({});
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(cached, nullptr);
  GenerationRequest turn1 = Request(*cached, 1, 48, true);
  const Outcome a1 = RunAlone(*cached, turn1);
  EXPECT_EQ(a1.tokens, RunAlone(*plain, turn1).tokens);
  GenerationRequest turn2 = turn1;
  turn2.id = 99;
  turn2.prompt_ids.insert(turn2.prompt_ids.end(), a1.tokens.begin(), a1.tokens.end());
  const std::vector<int32_t> more = cached->tokenizer().Encode(" Then they went home.", false);
  turn2.prompt_ids.insert(turn2.prompt_ids.end(), more.begin(), more.end());
  const Outcome a2 = RunAlone(*cached, turn2);
  EXPECT_EQ(a2.tokens, RunAlone(*plain, turn2).tokens);
  // Everything but the last partial block of the first turn's K/V (its last
  // generated token was never computed).
  const int32_t first_turn = static_cast<int32_t>(turn1.prompt_ids.size()) + 48 - 1;
  EXPECT_EQ(a2.cached, first_turn / 16 * 16);
}

TEST(PrefixCacheEngine, PreemptionWithSharedCachedBlocks) {
  const auto expected = Reference(16, 150, /*seeded=*/true);
  ASSERT_EQ(expected.size(), 16u);
  // 128 blocks of 16 tokens (one full context): far less than 16 × ~180.
  auto tight = MakeEngine({.kv_bytes = 128 * 20480});
  ASSERT_NE(tight, nullptr);
  auto got = RunConcurrently(*tight, 16, 150, true);
  EXPECT_GT(tight->Stats().preemptions, 0u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i].tokens, expected[i]) << "request " << i;
  EXPECT_TRUE(tight->WaitIdle(std::chrono::seconds(5)));
  EXPECT_EQ(tight->Stats().kv_cache_usage_ratio, 0.0);
}

TEST(PriorityEngine, UrgentRequestsPreemptAndOutputsStayTheSame) {
  const auto expected = Reference(8, 60, /*seeded=*/true);
  ASSERT_EQ(expected.size(), 8u);
  for (bool cache : {false, true}) {
    // Steps of at least 2 ms: running requests (60 tokens, over 120 ms) are
    // still running when the next, more urgent one arrives 15 ms later,
    // however fast the CPU.
    auto engine =
        MakeEngine({.cache = cache, .max_seqs = 2, .policy = "priority", .step_delay_ms = 2});
    ASSERT_NE(engine, nullptr);
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (int i = 0; i < 8; ++i) {
      sinks.push_back(std::make_shared<CollectingSink>());
      // Later requests are more urgent: each preempts a running one.
      ASSERT_TRUE(engine->Submit(Request(*engine, i, 60, true, /*priority=*/10 - i), sinks.back())
                      .ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
    auto got = Collect(sinks);
    EXPECT_GT(engine->Stats().preemptions, 0u) << "cache " << cache;
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(got[i].tokens, expected[i]) << "cache " << cache << " request " << i;
    }
  }
}

TEST(PriorityEngine, UnknownPolicyIsRejected) {
  EngineOptions options;
  options.model_path = testing::SourcePath("models/stories260K.gguf");
  options.scheduling_policy = "lottery";
  EXPECT_EQ(Engine::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
