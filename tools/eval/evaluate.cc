#include "tools/eval/evaluate.h"

#include <algorithm>
#include <span>

#include "absl/strings/str_cat.h"

namespace tessera::eval {

std::vector<int32_t> TokenizeText(const Tokenizer& tokenizer, std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return tokenizer.Encode(text, tokenizer.add_bos());
}

absl::StatusOr<ChunkPlan> PlanChunks(size_t num_tokens, int32_t ctx, int32_t max_chunks) {
  if (ctx < 4) return absl::InvalidArgumentError("the context must be at least 4 tokens");
  if (num_tokens < 2 * size_t(ctx)) {
    return absl::InvalidArgumentError(absl::StrCat("the text tokenizes to ", num_tokens,
                                                   " tokens; a context of ", ctx,
                                                   " needs at least ", 2 * size_t(ctx)));
  }
  ChunkPlan plan;
  plan.ctx = ctx;
  plan.num_chunks = static_cast<int32_t>(num_tokens / size_t(ctx));
  if (max_chunks > 0) plan.num_chunks = std::min(plan.num_chunks, max_chunks);
  plan.first = ctx / 2;
  return plan;
}

std::vector<int32_t> ChunkTokens(const std::vector<int32_t>& tokens, const ChunkPlan& plan,
                                 int32_t chunk, int32_t bos) {
  const size_t start = size_t(chunk) * size_t(plan.ctx);
  std::vector<int32_t> out(tokens.begin() + start, tokens.begin() + start + plan.ctx);
  if (bos >= 0) out[0] = bos;
  return out;
}

namespace {

int32_t BosFor(const Tokenizer& t) { return t.add_bos() ? t.bos_id() : -1; }

// Rows [first, ctx - 1) are scored: row p predicts token p + 1.
std::span<const float> Row(const std::vector<float>& logits, int32_t i, int32_t vocab) {
  return {logits.data() + size_t(i) * size_t(vocab), size_t(vocab)};
}

}  // namespace

absl::StatusOr<PerplexityStats> Perplexity(EvalModel& model, const std::vector<int32_t>& tokens,
                                           const ChunkPlan& plan, int32_t batch,
                                           const ChunkCallback& on_chunk) {
  PerplexityStats stats;
  const int32_t vocab = model.vocab_size();
  const int32_t score_end = plan.ctx - 1;
  std::vector<float> logits;
  for (int32_t c = 0; c < plan.num_chunks; ++c) {
    const std::vector<int32_t> chunk = ChunkTokens(tokens, plan, c, BosFor(model.tokenizer()));
    for (int32_t b = 0; b < plan.ctx; b += batch) {
      const int32_t e = std::min(plan.ctx, b + batch);
      auto lo = model.Step(chunk, b, e, plan.first, score_end, &logits);
      if (!lo.ok()) return lo.status();
      const int32_t rows = static_cast<int32_t>(logits.size() / size_t(vocab));
      for (int32_t r = 0; r < rows; ++r) {
        stats.nll.Add(NegLogLikelihood(Row(logits, r, vocab), chunk[*lo + r + 1]));
      }
    }
    if (on_chunk) on_chunk(c);
  }
  return stats;
}

absl::StatusOr<KldStats> KlDivergence(EvalModel& base, EvalModel& model,
                                      const std::vector<int32_t>& tokens, const ChunkPlan& plan,
                                      int32_t batch, const ChunkCallback& on_chunk) {
  if (auto s = CheckSameVocab(base.tokenizer(), model.tokenizer()); !s.ok()) return s;
  if (base.vocab_size() != model.vocab_size()) {
    return absl::FailedPreconditionError("the models' output heads differ in size");
  }
  KldStats stats;
  const int32_t vocab = base.vocab_size();
  const int32_t score_end = plan.ctx - 1;
  std::vector<float> base_logits, model_logits;
  for (int32_t c = 0; c < plan.num_chunks; ++c) {
    const std::vector<int32_t> chunk = ChunkTokens(tokens, plan, c, BosFor(base.tokenizer()));
    for (int32_t b = 0; b < plan.ctx; b += batch) {
      const int32_t e = std::min(plan.ctx, b + batch);
      auto lo = base.Step(chunk, b, e, plan.first, score_end, &base_logits);
      if (!lo.ok()) return lo.status();
      auto lo_model = model.Step(chunk, b, e, plan.first, score_end, &model_logits);
      if (!lo_model.ok()) return lo_model.status();
      const int32_t rows = static_cast<int32_t>(base_logits.size() / size_t(vocab));
      for (int32_t r = 0; r < rows; ++r) {
        stats.Add(CompareRows(Row(base_logits, r, vocab), Row(model_logits, r, vocab),
                              chunk[*lo + r + 1]));
      }
    }
    if (on_chunk) on_chunk(c);
  }
  std::sort(stats.kld_values.begin(), stats.kld_values.end());
  std::sort(stats.p_diff_values.begin(), stats.p_diff_values.end());
  return stats;
}

}  // namespace tessera::eval
