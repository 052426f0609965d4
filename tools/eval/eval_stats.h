// The statistics of tessera-eval, defined as llama.cpp's llama-perplexity
// defines them so that the numbers compare: per scored token the negative
// log-likelihood of the next token, and with a base model the KL divergence
// KL(base || model) = sum_i p_base(i) (log p_base(i) - log p_model(i)), the
// top-1 agreement and the difference of the next token's probability.
// Everything is summed in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tessera::eval {

// log p(i) = logits[i] - log_norm for one row of logits.
struct RowSoftmax {
  double log_norm = 0;  // max + log(sum exp(logits - max))
  int32_t argmax = 0;   // first index of the largest logit
};
RowSoftmax Softmax(std::span<const float> logits);

// -log p(target).
double NegLogLikelihood(std::span<const float> logits, int32_t target);

struct TokenComparison {
  double kld = 0;         // KL(base || model), nats
  double nll_base = 0;    // -log p_base(target)
  double nll_model = 0;   // -log p_model(target)
  double p_diff = 0;      // p_model(target) - p_base(target)
  bool same_top = false;  // argmax agrees
};
// Both rows have the same length (the vocabulary).
TokenComparison CompareRows(std::span<const float> base, std::span<const float> model,
                            int32_t target);

// A running mean with llama.cpp's uncertainty: sqrt((E[x²] - E[x]²) / (n - 1)).
struct Accumulator {
  double sum = 0;
  double sum2 = 0;
  size_t count = 0;
  void Add(double x) {
    sum += x;
    sum2 += x * x;
    ++count;
  }
  double Mean() const { return count ? sum / double(count) : 0.0; }
  // 0 when the variance is not positive or there are too few values
  // (llama-perplexity's KL statistics need more than 10).
  double StdErr(size_t min_count = 2) const;
};

// Perplexity over the scored tokens: exp(mean nll) ± ppl · stderr(nll).
struct PerplexityStats {
  Accumulator nll;
  double Value() const;
  double Uncertainty() const;
};

// Everything llama-perplexity --kl-divergence reports.
struct KldStats {
  Accumulator nll_base, nll_model, kld, p_diff, p_diff_sq;
  double sum_nll_cross = 0;  // sum nll_base * nll_model, for the covariance
  size_t same_top = 0;
  std::vector<float> kld_values;     // per token, for percentiles
  std::vector<float> p_diff_values;  // per token

  void Add(const TokenComparison& t);
  size_t count() const { return kld.count; }
  double LogPplCovariance() const;
  double LogPplRatioUncertainty() const;  // of mean ln(PPL(model)/PPL(base))
  double SameTopFraction() const;
  double SameTopUncertainty() const;
  double RmsPDiff() const;
  double RmsPDiffUncertainty() const;
};

// llama-perplexity's percentile: linear interpolation between sorted values
// at fraction · (n - 1). `sorted` is ascending and not empty.
double Percentile(const std::vector<float>& sorted, double fraction);
double Median(const std::vector<float>& sorted);

// How a token stream is cut into chunks, as llama-perplexity does: chunks of
// ctx tokens, the first token of each replaced by BOS when the model adds
// one, and the tokens after the first half (positions ctx/2 + 1 .. ctx - 1)
// scored from the logits of the position before.
struct ChunkPlan {
  int32_t ctx = 0;
  int32_t num_chunks = 0;
  int32_t first = 0;  // first row whose logits are used (ctx / 2)
  int32_t scored_per_chunk() const { return ctx - 1 - first; }
};

}  // namespace tessera::eval
