#include "tools/eval/report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::eval {
namespace {

nlohmann::json ValueJson(double value, double uncertainty) {
  return {{"value", value}, {"uncertainty", uncertainty}};
}

nlohmann::json RunJson(const RunInfo& info, size_t scored) {
  nlohmann::json j = {{"model", info.model_path}, {"text_tokens", info.num_tokens},
                      {"ctx", info.plan.ctx},     {"chunks", info.plan.num_chunks},
                      {"scored_tokens", scored},  {"seconds", info.seconds}};
  if (!info.base_path.empty()) j["base"] = info.base_path;
  return j;
}

std::string RunText(const RunInfo& info, size_t scored) {
  return absl::StrFormat(
      "text: %d tokens; %d chunks of %d tokens, %d tokens scored (the second half of each "
      "chunk); %.2f s\n",
      info.num_tokens, info.plan.num_chunks, info.plan.ctx, scored, info.seconds);
}

// ln(PPL(model)/PPL(base)) and PPL(base), PPL(model), with their
// uncertainties as llama-perplexity derives them.
struct PplSummary {
  double ppl_model, ppl_model_unc, ppl_base, ppl_base_unc, ratio_ln, ratio_ln_unc;
};

PplSummary Summarize(const KldStats& s) {
  PplSummary p;
  p.ppl_model = std::exp(s.nll_model.Mean());
  p.ppl_model_unc = p.ppl_model * s.nll_model.StdErr(11);
  p.ppl_base = std::exp(s.nll_base.Mean());
  p.ppl_base_unc = p.ppl_base * s.nll_base.StdErr(11);
  p.ratio_ln = s.nll_model.Mean() - s.nll_base.Mean();
  p.ratio_ln_unc = s.LogPplRatioUncertainty();
  return p;
}

}  // namespace

nlohmann::json PerplexityJson(const PerplexityStats& stats, const RunInfo& info) {
  nlohmann::json j = RunJson(info, stats.nll.count);
  j["mode"] = "ppl";
  j["ppl"] = ValueJson(stats.Value(), stats.Uncertainty());
  j["mean_nll"] = ValueJson(stats.nll.Mean(), stats.nll.StdErr());
  return j;
}

std::string PerplexityText(const PerplexityStats& stats, const RunInfo& info) {
  return absl::StrCat(
      RunText(info, stats.nll.count),
      absl::StrFormat("Final estimate: PPL = %.4f +/- %.5f\n", stats.Value(), stats.Uncertainty()));
}

nlohmann::json KldJson(const KldStats& s, const RunInfo& info) {
  const PplSummary p = Summarize(s);
  nlohmann::json j = RunJson(info, s.count());
  j["mode"] = "kld";
  j["ppl_model"] = ValueJson(p.ppl_model, p.ppl_model_unc);
  j["ppl_base"] = ValueJson(p.ppl_base, p.ppl_base_unc);
  j["ln_ppl_ratio"] = ValueJson(p.ratio_ln, p.ratio_ln_unc);
  j["kld"] = ValueJson(s.kld.Mean(), s.kld.StdErr(11));
  if (!s.kld_values.empty()) {
    j["kld_max"] = s.kld_values.back();
    j["kld_p99"] = Percentile(s.kld_values, 0.99);
    j["kld_median"] = Median(s.kld_values);
  }
  j["rms_dp"] = ValueJson(s.RmsPDiff(), s.RmsPDiffUncertainty());
  j["same_top_p"] = ValueJson(s.SameTopFraction(), s.SameTopUncertainty());
  return j;
}

std::string KldText(const KldStats& s, const RunInfo& info) {
  const PplSummary p = Summarize(s);
  std::string out = RunText(info, s.count());
  absl::StrAppend(&out, "====== Perplexity statistics ======\n");
  absl::StrAppendFormat(&out, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", p.ppl_model,
                        p.ppl_model_unc);
  absl::StrAppendFormat(&out, "Mean PPL(base)                : %10.6f ± %10.6f\n", p.ppl_base,
                        p.ppl_base_unc);
  absl::StrAppendFormat(&out, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", p.ratio_ln,
                        p.ratio_ln_unc);
  absl::StrAppend(&out, "\n====== KL divergence statistics ======\n");
  absl::StrAppendFormat(&out, "Mean    KLD: %10.6f ± %10.6f\n", s.kld.Mean(), s.kld.StdErr(11));
  if (!s.kld_values.empty()) {
    absl::StrAppendFormat(&out, "Maximum KLD: %10.6f\n", s.kld_values.back());
    absl::StrAppendFormat(&out, "99.0%%   KLD: %10.6f\n", Percentile(s.kld_values, 0.99));
    absl::StrAppendFormat(&out, "Median  KLD: %10.6f\n", Median(s.kld_values));
  }
  absl::StrAppend(&out, "\n====== Token probability statistics ======\n");
  absl::StrAppendFormat(&out, "RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * s.RmsPDiff(),
                        100.0 * s.RmsPDiffUncertainty());
  absl::StrAppendFormat(&out, "Same top p: %6.3f ± %5.3f %%\n", 100.0 * s.SameTopFraction(),
                        100.0 * s.SameTopUncertainty());
  return out;
}

}  // namespace tessera::eval
