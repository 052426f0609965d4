// Unit tests of tessera-bench's logic that needs no server: statistics,
// arrival schedules, token timing, prompts, options and reports.
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/bench/arrivals.h"
#include "client/bench/bench_options.h"
#include "client/bench/progress.h"
#include "client/bench/prompts.h"
#include "client/bench/report.h"
#include "client/bench/stats.h"
#include "client/bench/timeline.h"

namespace tessera::bench {
namespace {

// --- Percentiles and summaries (expected values from numpy.percentile) ---

TEST(PercentileTest, InterpolatesLinearlyBetweenClosestRanks) {
  const std::vector<double> sorted = {1.0, 2.0, 3.0, 4.0};
  EXPECT_DOUBLE_EQ(Percentile(sorted, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 99), 3.97);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 100), 4.0);
}

TEST(PercentileTest, SingleSampleIsEveryPercentile) {
  EXPECT_DOUBLE_EQ(Percentile({7.0}, 1), 7.0);
  EXPECT_DOUBLE_EQ(Percentile({7.0}, 99), 7.0);
}

TEST(PercentileTest, EmptyIsZero) { EXPECT_EQ(Percentile({}, 50), 0.0); }

TEST(SummarizeTest, SortsAndSummarizes) {
  std::vector<double> samples(101);
  std::iota(samples.rbegin(), samples.rend(), 0.0);  // 100, 99, ..., 0
  const Summary s = Summarize(samples);
  EXPECT_EQ(s.count, 101);
  EXPECT_DOUBLE_EQ(s.mean, 50.0);
  EXPECT_DOUBLE_EQ(s.p50, 50.0);
  EXPECT_DOUBLE_EQ(s.p90, 90.0);
  EXPECT_DOUBLE_EQ(s.p99, 99.0);
}

TEST(SummarizeTest, EmptyGivesZerosNotNan) {
  const Summary s = Summarize({});
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.mean, 0.0);
  EXPECT_EQ(s.p50, 0.0);
  EXPECT_EQ(s.p99, 0.0);
}

// --- Arrival schedule ---

struct GapStats {
  double mean = 0.0;
  double cv2 = 0.0;  // squared coefficient of variation
};

GapStats DrawGaps(double rate, double burstiness, int n) {
  ArrivalSchedule schedule(rate, burstiness, /*seed=*/42);
  std::vector<double> gaps(n);
  for (double& gap : gaps) gap = schedule.NextGapSeconds();
  GapStats stats;
  stats.mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / n;
  double var = 0.0;
  for (double gap : gaps) var += (gap - stats.mean) * (gap - stats.mean);
  stats.cv2 = var / n / (stats.mean * stats.mean);
  return stats;
}

TEST(ArrivalScheduleTest, PoissonGapsHaveMeanOneOverRate) {
  const GapStats stats = DrawGaps(/*rate=*/20.0, /*burstiness=*/1.0, 200000);
  EXPECT_NEAR(stats.mean, 0.05, 0.05 * 0.02);
  EXPECT_NEAR(stats.cv2, 1.0, 0.05);  // exponential gaps
}

TEST(ArrivalScheduleTest, BurstinessSetsVariabilityNotMean) {
  for (double burstiness : {0.25, 0.5, 4.0}) {
    const GapStats stats = DrawGaps(/*rate=*/5.0, burstiness, 200000);
    EXPECT_NEAR(stats.mean, 0.2, 0.2 * 0.03) << "burstiness " << burstiness;
    EXPECT_NEAR(stats.cv2, 1.0 / burstiness, 0.1 / burstiness) << "burstiness " << burstiness;
  }
}

TEST(ArrivalScheduleTest, SameSeedSameGaps) {
  ArrivalSchedule a(10.0, 1.0, 7), b(10.0, 1.0, 7), c(10.0, 1.0, 8);
  bool differs_from_c = false;
  for (int i = 0; i < 10; ++i) {
    const double gap = a.NextGapSeconds();
    EXPECT_GT(gap, 0.0);
    EXPECT_EQ(gap, b.NextGapSeconds());
    differs_from_c |= gap != c.NextGapSeconds();
  }
  EXPECT_TRUE(differs_from_c);
}

// --- Token timeline ---

TEST(TokenTimelineTest, OneTokenPerMessage) {
  TokenTimeline timeline;
  timeline.OnMessage(0.5, 1);
  timeline.OnMessage(0.6, 1);
  timeline.OnMessage(0.8, 1);
  timeline.OnDone(0.9);
  RequestRecord record;
  timeline.FillRecord(record);
  EXPECT_DOUBLE_EQ(record.ttft, 0.5);
  EXPECT_DOUBLE_EQ(record.e2e, 0.9);
  EXPECT_EQ(record.output_tokens, 3);
  ASSERT_EQ(record.itl.size(), 2u);
  EXPECT_NEAR(record.itl[0], 0.1, 1e-12);
  EXPECT_NEAR(record.itl[1], 0.2, 1e-12);
  EXPECT_NEAR(record.Tpot(), 0.2, 1e-12);  // (0.9 - 0.5) / 2
}

TEST(TokenTimelineTest, SpreadsAGapOverTheTokensOfOneMessage) {
  TokenTimeline timeline;
  timeline.OnMessage(0.1, 0);  // prompt ids only: not a token
  timeline.OnMessage(0.2, 2);  // first token plus one that came with it
  timeline.OnMessage(0.5, 3);
  timeline.OnMessage(0.6, 0);  // final message without tokens
  EXPECT_DOUBLE_EQ(timeline.ttft(), 0.2);
  EXPECT_EQ(timeline.tokens(), 5);
  const std::vector<double>& itl = timeline.itl();
  ASSERT_EQ(itl.size(), 4u);  // n - 1 samples
  EXPECT_EQ(itl[0], 0.0);
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(itl[i], 0.1, 1e-12);
  // The samples add up to the time from the first to the last token.
  EXPECT_NEAR(std::accumulate(itl.begin(), itl.end(), 0.0), 0.3, 1e-12);
}

TEST(TokenTimelineTest, NoTokensMeansNoSamples) {
  TokenTimeline timeline;
  timeline.OnDone(1.0);
  RequestRecord record;
  timeline.FillRecord(record);
  EXPECT_EQ(record.output_tokens, 0);
  EXPECT_TRUE(record.itl.empty());
  EXPECT_EQ(record.Tpot(), 0.0);
}

// --- Prompts ---

TEST(DatasetTest, ParsesPromptsAndSkipsBlankLines) {
  const auto prompts = ParseDataset(
      "{\"prompt\": \"Once upon a time\"}\n\n  \n{\"prompt\": \"Hi\", \"output_len\": 3}\r\n");
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  EXPECT_EQ(*prompts, (std::vector<std::string>{"Once upon a time", "Hi"}));
}

TEST(DatasetTest, NamesTheBadLine) {
  struct Case {
    const char* content;
    const char* want;
  };
  for (const Case& c : {Case{"{\"prompt\": \"a\"}\n{oops\n", "line 2: not valid JSON"},
                        Case{"{\"text\": \"a\"}\n", "line 1: want an object"},
                        Case{"{\"prompt\": 3}\n", "line 1: want an object"},
                        Case{"[\"prompt\"]\n", "line 1: want an object"},
                        Case{"\n{\"prompt\": \"\"}\n", "line 2: empty prompt"},
                        Case{"\n\n", "no prompts"}}) {
    const auto prompts = ParseDataset(c.content);
    ASSERT_FALSE(prompts.ok()) << c.content;
    EXPECT_EQ(prompts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(prompts.status().message().find(c.want), std::string::npos)
        << prompts.status().message();
  }
}

TEST(DatasetTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadDataset("/nonexistent/tessera-bench.jsonl").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RandomPromptTest, ExactLengthInRangeAndReproducible) {
  const std::vector<int32_t> ids = RandomPromptIds(/*seed=*/3, /*index=*/5, 300, 512);
  ASSERT_EQ(ids.size(), 300u);
  for (int32_t id : ids) {
    EXPECT_GE(id, kMinRandomTokenId);
    EXPECT_LT(id, 512);
  }
  EXPECT_EQ(ids, RandomPromptIds(3, 5, 300, 512));
  EXPECT_NE(ids, RandomPromptIds(3, 6, 300, 512));
  EXPECT_NE(ids, RandomPromptIds(4, 5, 300, 512));
}

TEST(PromptSourceTest, CyclesThroughTheDataset) {
  const PromptSource source = PromptSource::FromDataset({"a", "b", "c"});
  EXPECT_EQ(source.Get(0).text, "a");
  EXPECT_EQ(source.Get(4).text, "b");
  EXPECT_TRUE(source.Get(2).token_ids.empty());
}

TEST(PromptSourceTest, RandomPromptsAreTokenIds) {
  const Prompt prompt = PromptSource::Random(16, 100, 0).Get(1);
  EXPECT_TRUE(prompt.text.empty());
  EXPECT_EQ(prompt.token_ids, RandomPromptIds(0, 1, 16, 100));
}

}  // namespace
}  // namespace tessera::bench
