#include "tools/eval/eval_stats.h"

#include <algorithm>
#include <cmath>

namespace tessera::eval {

RowSoftmax Softmax(std::span<const float> logits) {
  RowSoftmax out;
  float max = logits[0];
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > max) {
      max = logits[i];
      out.argmax = static_cast<int32_t>(i);
    }
  }
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - double(max));
  out.log_norm = double(max) + std::log(sum);
  return out;
}

double NegLogLikelihood(std::span<const float> logits, int32_t target) {
  return Softmax(logits).log_norm - double(logits[target]);
}

TokenComparison CompareRows(std::span<const float> base, std::span<const float> model,
                            int32_t target) {
  const RowSoftmax b = Softmax(base);
  const RowSoftmax m = Softmax(model);
  double kld = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    const double log_pb = double(base[i]) - b.log_norm;
    const double log_pm = double(model[i]) - m.log_norm;
    kld += std::exp(log_pb) * (log_pb - log_pm);
  }
  TokenComparison t;
  t.kld = kld;
  t.nll_base = b.log_norm - double(base[target]);
  t.nll_model = m.log_norm - double(model[target]);
  t.p_diff = std::exp(-t.nll_model) - std::exp(-t.nll_base);
  t.same_top = b.argmax == m.argmax;
  return t;
}

double Accumulator::StdErr(size_t min_count) const {
  if (count < min_count || count < 2) return 0.0;
  const double mean = Mean();
  const double var = sum2 / double(count) - mean * mean;
  return var > 0 ? std::sqrt(var / double(count - 1)) : 0.0;
}

double PerplexityStats::Value() const { return std::exp(nll.Mean()); }
double PerplexityStats::Uncertainty() const { return Value() * nll.StdErr(); }

void KldStats::Add(const TokenComparison& t) {
  nll_base.Add(t.nll_base);
  nll_model.Add(t.nll_model);
  kld.Add(t.kld);
  p_diff.Add(t.p_diff);
  p_diff_sq.Add(t.p_diff * t.p_diff);
  sum_nll_cross += t.nll_base * t.nll_model;
  if (t.same_top) ++same_top;
  kld_values.push_back(static_cast<float>(t.kld));
  p_diff_values.push_back(static_cast<float>(t.p_diff));
}

double KldStats::LogPplCovariance() const {
  const size_t n = count();
  if (n < 10) return 0.0;
  const double cov = sum_nll_cross / double(n) - nll_model.Mean() * nll_base.Mean();
  return cov / double(n - 1);
}

double KldStats::LogPplRatioUncertainty() const {
  const double a = nll_model.StdErr(11), b = nll_base.StdErr(11);
  const double v = a * a + b * b - 2.0 * LogPplCovariance();
  return v > 0 ? std::sqrt(v) : 0.0;
}

double KldStats::SameTopFraction() const {
  return count() ? double(same_top) / double(count()) : 0.0;
}

double KldStats::SameTopUncertainty() const {
  if (count() < 2) return 0.0;
  const double p = SameTopFraction();
  return std::sqrt(p * (1 - p) / double(count() - 1));
}

double KldStats::RmsPDiff() const { return std::sqrt(p_diff_sq.Mean()); }

double KldStats::RmsPDiffUncertainty() const {
  const double rms = RmsPDiff();
  if (rms <= 0) return 0.0;
  // The stderr of the mean square comes from sum p^2 and sum p^4.
  return 0.5 / rms * p_diff_sq.StdErr(11);
}

double Percentile(const std::vector<float>& sorted, double fraction) {
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  double p = fraction * double(sorted.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  p -= double(ip);
  return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

double Median(const std::vector<float>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5 * (double(sorted[n / 2]) + sorted[n / 2 - 1]) : sorted[n / 2];
}

}  // namespace tessera::eval
