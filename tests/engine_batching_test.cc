// Batch invariance, preemption, stopping, cancellation and deadlines, on the
// real engine with the bundled stories260K model.
#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "testing/engine_harness.h"
#include "testing/temp_model.h"

namespace tessera {
namespace {

using testing::CollectingSink;
using testing::GreedyRequest;

const char* kPrompts[] = {
    "Once upon a time", "The little dog", "Lily and Tom went to the park",
    "One day, a bird", "There was a big red ball", "Sam liked to play",
    "The sun was hot and", "Mom said", "A cat sat on", "The boy was sad because",
    "In the forest there", "She wanted to", "They found a box", "Tim had a toy car",
    "It was a rainy day", "The fish swam"};

// A random-weight f16 model with grouped-query attention: with the default
// KV cache type it runs on an f16 cache. Written once per process.
std::string HalfModelPath() {
  static const std::string path = [] {
    RandomModelSpec spec;
    spec.dim = 128;
    spec.layers = 2;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.ffn = 256;
    spec.vocab_size = 512;
    spec.dtype = GgmlType::kF16;
    spec.seed = 3;
    return testing::WriteTempModel(spec, "f16");
  }();
  return path;
}

std::unique_ptr<Engine> MakeEngine(int64_t kv_bytes = 0, int32_t max_seqs = 64,
                                   int32_t max_tokens = 2048,
                                   const std::string& model = "models/stories260K.gguf",
                                   const std::string& kv_dtype = "auto") {
  EngineOptions options;
  options.kv_cache_dtype = kv_dtype;
  options.model_path = model.front() == '/' ? model : testing::SourcePath(model);
  options.device = "cpu";
  options.num_threads = 2;
  options.kv_cache_bytes = kv_bytes;
  options.max_num_seqs = max_seqs;
  options.max_batched_tokens = max_tokens;
  auto engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

GenerationRequest Request(Engine& engine, int i, int max_tokens, bool seeded) {
  GenerationRequest r = GreedyRequest(i + 1, engine.tokenizer().Encode(kPrompts[i % 16], true),
                                      max_tokens);
  r.stopping.ignore_eos = true;
  if (seeded) {
    r.sampling.temperature = 0.9f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 1000 + i;
    r.sampling.has_seed = true;
  }
  return r;
}

// Runs requests [0, n) concurrently and returns each one's tokens.
std::vector<std::vector<int32_t>> RunConcurrently(Engine& engine, int n, int max_tokens,
                                                  bool seeded) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < n; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    EXPECT_TRUE(engine.Submit(Request(engine, i, max_tokens, seeded), sinks.back()).ok());
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& s : sinks) {
    s->Wait();
    out.push_back(s->token_ids);
  }
  return out;
}

// Runs requests [0, n) one after another, each alone in the engine, and
// returns each one's tokens (an empty list for a request refused at submit).
std::vector<std::vector<int32_t>> RunOneAtATime(Engine& engine, int n, int max_tokens,
                                                bool seeded) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    auto sink = std::make_shared<CollectingSink>();
    const absl::Status submitted = engine.Submit(Request(engine, i, max_tokens, seeded), sink);
    EXPECT_TRUE(submitted.ok()) << submitted;
    if (submitted.ok()) sink->Wait();
    out.push_back(submitted.ok() ? sink->token_ids : std::vector<int32_t>{});
  }
  return out;
}

class BatchInvariance : public ::testing::TestWithParam<bool> {};

TEST_P(BatchInvariance, TokensIdenticalAloneAndIn4And16) {
  const bool seeded = GetParam();
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  std::vector<std::vector<int32_t>> alone;
  for (int i = 0; i < 16; ++i) {
    auto sink = std::make_shared<CollectingSink>();
    ASSERT_TRUE(engine->Submit(Request(*engine, i, 48, seeded), sink).ok());
    sink->Wait();
    ASSERT_EQ(sink->token_ids.size(), 48u);
    alone.push_back(sink->token_ids);
  }
  auto four = RunConcurrently(*engine, 4, 48, seeded);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(four[i], alone[i]) << "request " << i << " in 4";
  auto sixteen = RunConcurrently(*engine, 16, 48, seeded);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(sixteen[i], alone[i]) << "request " << i << " in 16";
}

INSTANTIATE_TEST_SUITE_P(GreedyAndSeeded, BatchInvariance, ::testing::Bool());

TEST(Preemption, OutputEqualsUnpreemptedRun) {
  auto roomy = MakeEngine();
  ASSERT_NE(roomy, nullptr);
  auto expected = RunConcurrently(*roomy, 16, 200, /*seeded=*/true);
  // 128 blocks of 16 tokens: one full context, far less than 16 × ~210 tokens.
  auto tight = MakeEngine(/*kv_bytes=*/128 * 20480);
  ASSERT_NE(tight, nullptr);
  auto got = RunConcurrently(*tight, 16, 200, /*seeded=*/true);
  EXPECT_GT(tight->Stats().preemptions, 0u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], expected[i]) << "request " << i;
}

TEST(HalfPrecision, F16CacheBatchInvariantThroughPreemption) {
  auto roomy = MakeEngine(0, 64, 2048, HalfModelPath());
  ASSERT_NE(roomy, nullptr);
  EXPECT_EQ(roomy->model_info().kv_cache_dtype, "f16");
  const auto alone = RunOneAtATime(*roomy, 16, 150, true);
  EXPECT_EQ(RunConcurrently(*roomy, 16, 150, true), alone);
  // 128 blocks of 16 tokens × 2 layers × K,V × 64 × 2 bytes: one context.
  auto tight = MakeEngine(128 * 8192, 64, 2048, HalfModelPath());
  ASSERT_NE(tight, nullptr);
  EXPECT_EQ(RunConcurrently(*tight, 16, 150, true), alone);
  EXPECT_GT(tight->Stats().preemptions, 0u);
}

// The int8 KV cache (a scale per token and KV head): each request's tokens
// are the same alone, among 16, and through preemption (named Preemption.*
// so that every CPU kernel level runs it: cpu_level_* in CMakeLists.txt).
TEST(Preemption, Int8CacheBatchInvariantThroughPreemption) {
  auto roomy = MakeEngine(0, 64, 2048, "models/stories260K.gguf", "int8");
  ASSERT_NE(roomy, nullptr);
  EXPECT_EQ(roomy->model_info().kv_cache_dtype, "int8");
  const auto alone = RunOneAtATime(*roomy, 16, 200, true);
  EXPECT_EQ(RunConcurrently(*roomy, 16, 200, true), alone);
  // 128 blocks of 16 tokens × 5 layers × K,V × 4 heads × (8 + 4) bytes:
  // about four contexts, far less than 16 × ~210 tokens.
  auto tight = MakeEngine(128 * 7680, 64, 2048, "models/stories260K.gguf", "int8");
  ASSERT_NE(tight, nullptr);
  EXPECT_EQ(RunConcurrently(*tight, 16, 200, true), alone);
  EXPECT_GT(tight->Stats().preemptions, 0u);
  // The cache type changes the arithmetic, not what the model says: the
  // first greedy tokens of the f16 and int8 caches agree (a wrong scale or
  // layout would not).
  auto f16 = MakeEngine(0, 64, 2048, "models/stories260K.gguf", "f16");
  ASSERT_NE(f16, nullptr);
  const auto f16_tokens = RunConcurrently(*f16, 16, 8, false);
  const auto int8_tokens = RunConcurrently(*roomy, 16, 8, false);
  int same = 0;
  for (int i = 0; i < 16; ++i) {
    for (int t = 0; t < 4; ++t) same += f16_tokens[i].at(t) == int8_tokens[i].at(t);
  }
  EXPECT_GE(same, 52) << "of 64 first tokens";  // 60 on every kernel level
}

TEST(ChunkedPrefill, SmallTokenBudgetGivesSameOutput) {
  auto normal = MakeEngine();
  auto chunked = MakeEngine(0, 64, /*max_tokens=*/3);
  ASSERT_NE(normal, nullptr);
  ASSERT_NE(chunked, nullptr);
  auto a = RunConcurrently(*normal, 6, 20, false);
  auto b = RunConcurrently(*chunked, 6, 20, false);
  EXPECT_EQ(a, b);
}

TEST(Stopping, StopStringEndsBeforeMatch) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  auto req = GreedyRequest(1, engine->tokenizer().Encode("Once upon a time", true), 64);
  req.stopping.stop_strings = {"Lily"};
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->Submit(req, sink).ok());
  sink->Wait();
  EXPECT_EQ(sink->finish.reason, FinishReason::kStop);
  EXPECT_EQ(sink->text, ", there was a little girl named ");
}

TEST(Stopping, StopTokenIdAndMaxTokens) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  auto req = GreedyRequest(1, engine->tokenizer().Encode("Once upon a time", true), 64);
  req.stopping.stop_token_ids = {261};  // the 4th generated token of the golden run
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->Submit(req, sink).ok());
  sink->Wait();
  EXPECT_EQ(sink->finish.reason, FinishReason::kStop);
  EXPECT_EQ(sink->token_ids, (std::vector<int32_t>{432, 383, 286, 261}));
  auto req2 = GreedyRequest(2, req.prompt_ids, 3);
  auto sink2 = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->Submit(req2, sink2).ok());
  sink2->Wait();
  EXPECT_EQ(sink2->finish.reason, FinishReason::kLength);
  EXPECT_EQ(sink2->finish.completion_tokens, 3);
}

TEST(Lifecycle, CancelFreesBlocks) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  auto req = GreedyRequest(7, engine->tokenizer().Encode("Once upon a time", true), 2000);
  req.stopping.ignore_eos = true;
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->Submit(req, sink).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  engine->Cancel(7);
  sink->Wait();
  EXPECT_EQ(sink->finish.reason, FinishReason::kCancelled);
  EXPECT_TRUE(engine->WaitIdle(std::chrono::seconds(5)));
  EXPECT_EQ(engine->Stats().kv_cache_usage_ratio, 0.0);
  EXPECT_EQ(engine->Stats().requests_running, 0);
}

TEST(Lifecycle, DeadlineFinishesRequest) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  auto req = GreedyRequest(8, engine->tokenizer().Encode("Once upon a time", true), 2000);
  req.stopping.ignore_eos = true;
  req.deadline = Clock::now() + std::chrono::milliseconds(30);
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine->Submit(req, sink).ok());
  sink->Wait();
  EXPECT_EQ(sink->finish.reason, FinishReason::kDeadline);
  EXPECT_LT(sink->finish.completion_tokens, 2000);
  EXPECT_TRUE(engine->WaitIdle(std::chrono::seconds(5)));
  EXPECT_EQ(engine->Stats().kv_cache_usage_ratio, 0.0);
}

std::unique_ptr<Engine> MakeFailingEngine(int32_t failing_steps) {
  EngineOptions options;
  options.model_path = testing::SourcePath("models/stories260K.gguf");
  options.device = "cpu";
  options.num_threads = 2;
  options.max_consecutive_failed_steps = 3;
  options.fail_first_steps_for_testing = failing_steps;
  auto engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Runs one greedy request to its end and returns how it finished.
FinishEvent RunOne(Engine& engine, uint64_t id) {
  auto sink = std::make_shared<CollectingSink>();
  const absl::Status submitted =
      engine.Submit(GreedyRequest(id, engine.tokenizer().Encode("Once", true), 4), sink);
  if (!submitted.ok()) {
    FinishEvent refused;
    refused.reason = FinishReason::kError;
    refused.status = submitted;
    return refused;
  }
  sink->Wait();
  return sink->finish;
}

TEST(Health, FewerFailuresThanTheLimitLeaveTheEngineHealthy) {
  auto engine = MakeFailingEngine(2);
  ASSERT_NE(engine, nullptr);
  for (uint64_t id : {1, 2}) {
    const FinishEvent failed = RunOne(*engine, id);
    EXPECT_EQ(failed.reason, FinishReason::kError);
    EXPECT_EQ(failed.status.code(), absl::StatusCode::kInternal);
  }
  EXPECT_TRUE(engine->Stats().healthy);
  EXPECT_EQ(RunOne(*engine, 3).reason, FinishReason::kLength);  // a success resets the count
  EXPECT_TRUE(engine->Stats().healthy);
  EXPECT_TRUE(engine->WaitIdle(std::chrono::seconds(5)));
  EXPECT_EQ(engine->Stats().kv_cache_usage_ratio, 0.0);
}

TEST(Health, RepeatedStepFailuresMakeTheEngineUnhealthy) {
  auto engine = MakeFailingEngine(1000);
  ASSERT_NE(engine, nullptr);
  for (uint64_t id : {1, 2, 3}) EXPECT_EQ(RunOne(*engine, id).reason, FinishReason::kError);
  EXPECT_FALSE(engine->Stats().healthy);
  const FinishEvent refused = RunOne(*engine, 4);
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kUnavailable) << refused.status;
  EXPECT_TRUE(engine->WaitIdle(std::chrono::seconds(5)));
  EXPECT_EQ(engine->Stats().kv_cache_usage_ratio, 0.0);  // failed requests freed their blocks
}

// Records the engine's published waiting count when the first token arrives
// (on the engine thread, during the step that produced it).
class WaitingAtFirstToken : public CollectingSink {
 public:
  explicit WaitingAtFirstToken(const Engine* engine) : engine_(engine) {}
  void OnTokens(TokenEvent event) override {
    if (waiting_at_first_token < 0) waiting_at_first_token = engine_->Stats().requests_waiting;
    CollectingSink::OnTokens(std::move(event));
  }
  int32_t waiting_at_first_token = -1;

 private:
  const Engine* engine_;
};

// A client may answer a token with a new request at once: by then the queue
// count that admission checks must no longer include the request that is
// already running, or the new one would be refused for a queue that is empty.
TEST(Admission, QueueCountIsCurrentWhenTokensGoOut) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  auto sink = std::make_shared<WaitingAtFirstToken>(engine.get());
  ASSERT_TRUE(engine->Submit(GreedyRequest(1, engine->tokenizer().Encode("Once", true), 4), sink)
                  .ok());
  sink->Wait();
  EXPECT_EQ(sink->waiting_at_first_token, 0);
}

TEST(Admission, RejectsInvalidAndOverflowingRequests) {
  auto engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  auto sink = std::make_shared<CollectingSink>();
  EXPECT_EQ(engine->Submit(GreedyRequest(1, {}, 4), sink).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Submit(GreedyRequest(2, {1, 512}, 4), sink).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Submit(GreedyRequest(3, {1, 2}, 2047), sink).code(),
            absl::StatusCode::kInvalidArgument);
  engine->StopAccepting();
  EXPECT_EQ(engine->Submit(GreedyRequest(4, {1, 2}, 4), sink).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera
