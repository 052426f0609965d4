// tessera-bench's workload options: shared prefix, multi-turn conversations
// and the priority mix, and the per-priority report.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/bench/bench_options.h"
#include "client/bench/report.h"
#include "client/bench/workload.h"

namespace tessera::bench {
namespace {

TEST(WorkloadOptionsTest, DefaultsAreOff) {
  const auto options = ParseOptions({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->shared_prefix_len, 0);
  EXPECT_EQ(options->multi_turn, 1);
  EXPECT_DOUBLE_EQ(options->priority_mix, 0.0);
}

TEST(WorkloadOptionsTest, ParsesTheWorkloadFlags) {
  const auto options = ParseOptions(
      {"--shared-prefix-len", "1024", "--input-len=32", "--multi-turn=4", "--priority-mix", "0.1"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->shared_prefix_len, 1024);
  EXPECT_EQ(options->input_len, 32);
  EXPECT_EQ(options->multi_turn, 4);
  EXPECT_DOUBLE_EQ(options->priority_mix, 0.1);
}

TEST(WorkloadOptionsTest, RejectsBadValuesAndCombinations) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--shared-prefix-len", "-1"}, "--shared-prefix-len"},
      {{"--shared-prefix-len", "x"}, "--shared-prefix-len"},
      {{"--multi-turn", "0"}, "--multi-turn"},
      {{"--multi-turn", "1001"}, "--multi-turn"},
      {{"--priority-mix", "1.5"}, "--priority-mix"},
      {{"--priority-mix", "-0.1"}, "--priority-mix"},
      {{"--priority-mix", "nan"}, "--priority-mix"},
      {{"--priority-mix"}, "--priority-mix"},
      {{"--dataset", "d.jsonl", "--shared-prefix-len", "8"}, "--dataset"},
      {{"--dataset", "d.jsonl", "--multi-turn", "2"}, "--dataset"},
  };
  for (const auto& [args, expected] : cases) {
    const auto options = ParseOptions(args);
    ASSERT_FALSE(options.ok()) << args[0];
    EXPECT_NE(std::string(options.status().message()).find(expected), std::string::npos)
        << options.status();
  }
}

TEST(WorkloadTest, PriorityMixIsAboutTheFractionAndReproducible) {
  int high = 0;
  for (int64_t i = 0; i < 10000; ++i) high += IsHighPriority(3, i, 0.1);
  EXPECT_GT(high, 900);
  EXPECT_LT(high, 1100);
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(IsHighPriority(3, i, 0.1), IsHighPriority(3, i, 0.1));
    EXPECT_FALSE(IsHighPriority(3, i, 0.0));
    EXPECT_TRUE(IsHighPriority(3, i, 1.0));
  }
}

TEST(WorkloadTest, SharedPrefixStartsEveryPrompt) {
  Conversations c({/*seed=*/1, /*vocab=*/500, /*prefix=*/20, /*question=*/5, /*turns=*/1});
  const std::vector<int32_t> prefix = SharedPrefixIds(1, 20, 500);
  ASSERT_EQ(prefix.size(), 20u);
  const std::vector<int32_t> a = c.Next(0), b = c.Next(1);
  ASSERT_EQ(a.size(), 25u);
  ASSERT_EQ(b.size(), 25u);
  EXPECT_EQ(std::vector<int32_t>(a.begin(), a.begin() + 20), prefix);
  EXPECT_EQ(std::vector<int32_t>(b.begin(), b.begin() + 20), prefix);
  EXPECT_NE(std::vector<int32_t>(a.begin() + 20, a.end()),
            std::vector<int32_t>(b.begin() + 20, b.end()));
  c.Done(0, true, {7, 7});
  EXPECT_EQ(c.Next(2).size(), 25u);  // one turn: a new conversation each time
  EXPECT_EQ(c.MaxTokens(16), 20 + 5 + 16);
}

TEST(WorkloadTest, TurnsResendTheHistoryWithTheAnswers) {
  Conversations c({/*seed=*/1, /*vocab=*/500, /*prefix=*/0, /*question=*/4, /*turns=*/3});
  const std::vector<int32_t> t1 = c.Next(10);
  const std::vector<int32_t> other = c.Next(11);  // turn 1 not done: a second conversation
  ASSERT_EQ(t1.size(), 4u);
  EXPECT_NE(other, t1);
  c.Done(10, true, {41, 42});
  const std::vector<int32_t> t2 = c.Next(12);
  ASSERT_EQ(t2.size(), 4u + 2 + 4);
  EXPECT_EQ(std::vector<int32_t>(t2.begin(), t2.begin() + 4), t1);
  EXPECT_EQ(t2[4], 41);
  EXPECT_EQ(t2[5], 42);
  c.Done(12, true, {43});
  const std::vector<int32_t> t3 = c.Next(13);
  EXPECT_EQ(std::vector<int32_t>(t3.begin(), t3.begin() + 10), t2);
  EXPECT_EQ(t3[10], 43);
  c.Done(13, true, {44});  // the third and last turn
  c.Done(11, false, {});   // a failure ends its conversation
  EXPECT_EQ(c.Next(14).size(), 4u);  // so a new one starts
  EXPECT_EQ(c.MaxTokens(8), 3 * (4 + 8));
}

TEST(WorkloadTest, ReportSplitsLatencyByPriority) {
  std::vector<RequestRecord> records(4);
  for (int i = 0; i < 4; ++i) {
    records[i].ok = true;
    records[i].output_tokens = 2;
    records[i].prompt_tokens = 100;
    records[i].cached_prompt_tokens = 64;
    records[i].ttft = 0.1 * (i + 1);
    records[i].e2e = 1.0;
    records[i].priority = i == 0 ? kHighPriority : 0;
  }
  const BenchResult result = Aggregate(records, 2.0);
  EXPECT_EQ(result.cached_prompt_tokens, 256);
  EXPECT_EQ(result.PrefillTokensComputed(), 400 - 256);
  ASSERT_EQ(result.by_priority.size(), 2u);
  EXPECT_EQ(result.by_priority.at(kHighPriority).completed, 1);
  EXPECT_DOUBLE_EQ(result.by_priority.at(kHighPriority).ttft.p99, 0.1);
  EXPECT_EQ(result.by_priority.at(0).completed, 3);
  EXPECT_GT(result.by_priority.at(0).ttft.p50, 0.1);
  Options options;
  options.priority_mix = 0.25;
  const std::string table = FormatTable(result, options, {"m", "s"});
  EXPECT_NE(table.find("Priority -1 (1 requests)"), std::string::npos) << table;
  EXPECT_NE(table.find("Prefill tokens computed"), std::string::npos);
  const nlohmann::json json = ToJson(result, options, {"m", "s"});
  EXPECT_EQ(json["by_priority"]["-1"]["completed"], 1);
  EXPECT_EQ(json["prefill_tokens_computed"], 144);
}

}  // namespace
}  // namespace tessera::bench
