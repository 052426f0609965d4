#include "engine/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

SamplingParams Seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  p.has_seed = true;
  return p;
}

// Deterministic pseudo-random logits in [-5, 5], a vocabulary-sized row.
std::vector<float> RandomLogits(int32_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(gen() * 0x1.0p-32 * 10.0 - 5.0);
  return v;
}

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

int32_t SampleOnce(const SamplingParams& params, std::vector<float> logits,
                   std::vector<int32_t> prompt = {}) {
  SequenceSampler s(params, prompt, static_cast<int32_t>(logits.size()));
  return s.Sample(logits).token_id;
}

// Draws `count` tokens from the same row, accepting none (so penalties stay off).
std::vector<int32_t> Draws(const SamplingParams& params, const std::vector<float>& logits,
                           int count) {
  SequenceSampler s(params, {}, static_cast<int32_t>(logits.size()));
  std::vector<int32_t> out;
  for (int i = 0; i < count; ++i) {
    std::vector<float> row = logits;
    out.push_back(s.Sample(row).token_id);
  }
  return out;
}

TEST(SamplerTest, GreedyPicksArgmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  for (uint32_t seed = 0; seed < 5; ++seed) {
    std::vector<float> logits = RandomLogits(32000, seed);
    EXPECT_EQ(SampleOnce(p, logits), Argmax(logits));
  }
}

TEST(SamplerTest, GreedyTiesPickLowestId) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(SampleOnce(p, {1.0f, 3.0f, 2.0f, 3.0f}), 1);
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedDiffers) {
  std::vector<float> logits = RandomLogits(1000, 7);
  for (float& x : logits) x *= 0.2f;  // flat enough that draws vary
  SamplingParams p = Seeded(42);
  std::vector<int32_t> a = Draws(p, logits, 200);
  std::vector<int32_t> b = Draws(p, logits, 200);
  EXPECT_EQ(a, b);
  std::vector<int32_t> c = Draws(Seeded(43), logits, 200);
  EXPECT_NE(a, c);
}

TEST(SamplerTest, SameSeedSameSequenceWithTruncation) {
  std::vector<float> logits = RandomLogits(5000, 8);
  SamplingParams p = Seeded(9);
  p.top_k = 50;
  p.top_p = 0.9f;
  p.min_p = 0.01f;
  EXPECT_EQ(Draws(p, logits, 200), Draws(p, logits, 200));
}

TEST(SamplerTest, TopKOneIsGreedy) {
  SamplingParams p = Seeded(1);
  p.top_k = 1;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = RandomLogits(32000, seed);
    p.seed = seed;
    EXPECT_EQ(SampleOnce(p, logits), Argmax(logits));
  }
}

TEST(SamplerTest, TinyTopPIsGreedy) {
  SamplingParams p = Seeded(1);
  p.top_p = 1e-6f;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = RandomLogits(32000, seed);
    p.seed = seed;
    EXPECT_EQ(SampleOnce(p, logits), Argmax(logits));
  }
}

TEST(SamplerTest, MinPOneIsGreedy) {
  SamplingParams p = Seeded(1);
  p.min_p = 1.0f;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = RandomLogits(32000, seed);
    logits[Argmax(logits)] += 0.01f;  // min_p = 1 keeps every tied maximum
    p.seed = seed;
    EXPECT_EQ(SampleOnce(p, logits), Argmax(logits));
  }
}

// Pearson's chi-square over the 4 outcomes; 3 degrees of freedom, and the
// 0.999 quantile of that distribution is 16.27.
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * n;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

std::vector<double> Softmax(const std::vector<float>& logits) {
  std::vector<double> p(logits.size());
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(logits[i] - m);
  for (double& x : p) x /= sum;
  return p;
}

TEST(SamplerTest, FrequenciesMatchSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 1.5f};
  const std::vector<double> probs = Softmax(logits);
  constexpr int kDraws = 20000;
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::vector<int> counts(4, 0);
    for (int32_t id : Draws(Seeded(seed), logits, kDraws)) counts[id]++;
    EXPECT_LT(ChiSquare(counts, probs, kDraws), 16.27) << "seed " << seed;
  }
}

TEST(SamplerTest, FrequenciesMatchTruncatedSoftmax) {
  // top_p = 0.8 over probs sorted {0.419, 0.254, 0.154, 0.093+...}: keeps 3.
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 1.5f};
  SamplingParams p = Seeded(5);
  p.top_p = 0.8f;
  std::vector<double> probs = Softmax({1.0f, 2.0f, -1e30f, 1.5f});
  constexpr int kDraws = 20000;
  std::vector<int> counts(4, 0);
  for (int32_t id : Draws(p, logits, kDraws)) counts[id]++;
  EXPECT_EQ(counts[2], 0);
  std::vector<int> kept = {counts[0], counts[1], counts[3]};
  std::vector<double> kept_probs = {probs[0], probs[1], probs[3]};
  // 2 degrees of freedom: the 0.999 quantile is 13.82.
  EXPECT_LT(ChiSquare(kept, kept_probs, kDraws), 13.82);
}

TEST(SamplerTest, TopKTwoStaysInTopTwo) {
  std::vector<float> logits = RandomLogits(32000, 11);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 2, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  SamplingParams p = Seeded(3);
  p.top_k = 2;
  p.temperature = 5.0f;  // flatten so that both are drawn
  std::vector<int32_t> draws = Draws(p, logits, 500);
  for (int32_t id : draws) EXPECT_TRUE(id == order[0] || id == order[1]) << id;
  EXPECT_NE(std::count(draws.begin(), draws.end(), order[0]), 0);
  EXPECT_NE(std::count(draws.begin(), draws.end(), order[1]), 0);
}

TEST(SamplerTest, RepetitionPenaltyChangesArgmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  const std::vector<float> logits = {2.0f, 1.5f, -1.0f};
  EXPECT_EQ(SampleOnce(p, logits, {0}), 0);
  p.repetition_penalty = 1.5f;  // 2.0 / 1.5 = 1.33 < 1.5
  EXPECT_EQ(SampleOnce(p, logits, {0}), 1);
  // A negative logit is multiplied, so it moves further down.
  std::vector<float> row = {-1.0f, -1.2f};
  SequenceSampler s(p, std::vector<int32_t>{0}, 2);
  EXPECT_EQ(s.Sample(row).token_id, 1);
  EXPECT_FLOAT_EQ(row[0], -1.5f);
  EXPECT_FLOAT_EQ(row[1], -1.2f);
}

TEST(SamplerTest, PresenceAndFrequencyPenalties) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  // Prompt tokens are not penalised by presence/frequency.
  SequenceSampler s(p, std::vector<int32_t>{2}, 3);
  s.Accept(0);
  s.Accept(0);
  s.Accept(1);
  std::vector<float> row = {3.0f, 3.0f, 3.0f};
  EXPECT_EQ(s.Sample(row).token_id, 2);
  EXPECT_FLOAT_EQ(row[0], 3.0f - 0.5f - 2 * 0.25f);
  EXPECT_FLOAT_EQ(row[1], 3.0f - 0.5f - 1 * 0.25f);
  EXPECT_FLOAT_EQ(row[2], 3.0f);
}

TEST(SamplerTest, TemperatureIsAppliedInPlace) {
  SamplingParams p = Seeded(0);
  p.temperature = 2.0f;
  std::vector<float> row = {4.0f, -2.0f};
  SequenceSampler s(p, {}, 2);
  s.Sample(row);
  EXPECT_FLOAT_EQ(row[0], 2.0f);
  EXPECT_FLOAT_EQ(row[1], -1.0f);
}

// Log-softmax computed the obvious way, in double.
std::vector<double> NaiveLogSoftmax(const std::vector<float>& logits) {
  double m = -INFINITY;
  for (float x : logits) m = std::max<double>(m, x);
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x - m);
  std::vector<double> out;
  for (float x : logits) out.push_back(x - m - std::log(sum));
  return out;
}

TEST(SamplerTest, LogprobsAreLogSoftmaxOfRawLogits) {
  const std::vector<float> raw = RandomLogits(5000, 21);
  const std::vector<double> ref = NaiveLogSoftmax(raw);
  SamplingParams p = Seeded(4);
  p.temperature = 0.7f;
  p.top_k = 40;
  p.repetition_penalty = 1.3f;
  p.top_logprobs = 5;
  SequenceSampler s(p, std::vector<int32_t>{Argmax(raw)}, 5000);
  std::vector<float> row = raw;
  SampledToken t = s.Sample(row);
  EXPECT_NEAR(t.logprob, ref[t.token_id], 1e-4);

  std::vector<int32_t> order(raw.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return ref[a] > ref[b]; });
  ASSERT_EQ(t.top.size(), 5u);
  for (size_t i = 0; i < t.top.size(); ++i) {
    EXPECT_EQ(t.top[i].token_id, order[i]);
    EXPECT_NEAR(t.top[i].logprob, ref[order[i]], 1e-4);
    if (i > 0) {
      EXPECT_GE(t.top[i - 1].logprob, t.top[i].logprob);
    }
  }
}

TEST(SamplerTest, LogprobOnlyForChosenToken) {
  const std::vector<float> raw = {0.0f, 1.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  SequenceSampler s(p, {}, 3);
  std::vector<float> row = raw;
  SampledToken t = s.Sample(row);
  EXPECT_EQ(t.token_id, 2);
  EXPECT_NEAR(t.logprob, NaiveLogSoftmax(raw)[2], 1e-6);
  EXPECT_TRUE(t.top.empty());
}

TEST(SamplerTest, TopLogprobTiesPreferLowerId) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_logprobs = 3;
  SequenceSampler s(p, {}, 4);
  std::vector<float> row = {1.0f, 2.0f, 1.0f, 2.0f};
  SampledToken t = s.Sample(row);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].token_id, 1);
  EXPECT_EQ(t.top[1].token_id, 3);
  EXPECT_EQ(t.top[2].token_id, 0);
}

TEST(SamplerTest, VeryNegativeLogitsNeverGiveNaN) {
  std::vector<float> base(1000, -1e30f);
  base[17] = 0.5f;
  base[400] = 0.25f;
  for (float t : {0.0f, 0.01f, 1.0f, 3.0f}) {
    for (int mode = 0; mode < 4; ++mode) {
      SamplingParams p = Seeded(mode);
      p.temperature = t;
      p.top_k = mode == 1 ? 10 : 0;
      p.top_p = mode == 2 ? 0.5f : 1.0f;
      p.min_p = mode == 3 ? 0.05f : 0.0f;
      p.repetition_penalty = 1.2f;
      p.frequency_penalty = 1.0f;
      p.top_logprobs = 3;
      SequenceSampler s(p, std::vector<int32_t>{0, 17}, 1000);
      s.Accept(1);
      for (int i = 0; i < 20; ++i) {
        std::vector<float> row = base;
        SampledToken tok = s.Sample(row);
        EXPECT_TRUE(tok.token_id == 17 || tok.token_id == 400) << tok.token_id;
        EXPECT_FALSE(std::isnan(tok.logprob));
        for (const TokenLogprob& alt : tok.top) EXPECT_FALSE(std::isnan(alt.logprob));
      }
    }
  }
}

TEST(SamplerTest, AllNegativeInfinityIsHandled) {
  SamplingParams p = Seeded(0);
  p.logprobs = true;
  SequenceSampler s(p, {}, 3);
  std::vector<float> row(3, -INFINITY);
  SampledToken t = s.Sample(row);
  EXPECT_GE(t.token_id, 0);
  EXPECT_LT(t.token_id, 3);
  EXPECT_FALSE(std::isnan(t.logprob));
}

TEST(SamplerTest, TopPWideNucleusMatchesReferenceCutoff) {
  // Flat logits over a large vocabulary force the sorted prefix to grow.
  std::vector<float> logits = RandomLogits(32000, 31);
  for (float& x : logits) x *= 0.01f;
  SamplingParams p = Seeded(6);
  p.top_p = 0.5f;
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::vector<double> probs = Softmax(logits);
  double cum = 0.0;
  size_t keep = 0;
  while (cum < 0.5) cum += probs[order[keep++]];
  std::vector<char> allowed(logits.size(), 0);
  for (size_t i = 0; i < keep; ++i) allowed[order[i]] = 1;
  for (int32_t id : Draws(p, logits, 300)) EXPECT_TRUE(allowed[id]) << id;
}

}  // namespace
}  // namespace tessera
