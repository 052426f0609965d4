// Perplexity and KL divergence over a text, chunked as llama-perplexity
// chunks it (eval_stats.h: ChunkPlan).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/eval/eval_model.h"
#include "tools/eval/eval_stats.h"

namespace tessera::eval {

// The text as llama-perplexity reads `-f FILE` (one trailing newline
// dropped), tokenized with BOS when the tokenizer adds one.
std::vector<int32_t> TokenizeText(const Tokenizer& tokenizer, std::string_view text);

// INVALID_ARGUMENT when there are fewer than 2 · ctx tokens (as
// llama-perplexity refuses), or ctx < 4. max_chunks <= 0 means all.
absl::StatusOr<ChunkPlan> PlanChunks(size_t num_tokens, int32_t ctx, int32_t max_chunks);

// Chunk i of the stream, its first token replaced by `bos` when bos >= 0.
std::vector<int32_t> ChunkTokens(const std::vector<int32_t>& tokens, const ChunkPlan& plan,
                                 int32_t chunk, int32_t bos);

// Called after each chunk with its index (from 0).
using ChunkCallback = std::function<void(int32_t chunk)>;

// Perplexity of `model` over the scored tokens. `batch` is the tokens per
// forward step.
absl::StatusOr<PerplexityStats> Perplexity(EvalModel& model, const std::vector<int32_t>& tokens,
                                           const ChunkPlan& plan, int32_t batch,
                                           const ChunkCallback& on_chunk = nullptr);

// KL(base || model) and the rest of KldStats over the scored tokens; both
// models run each sub-batch in turn, so only 2 · batch rows of logits are
// held at once. The vocabularies must match (CheckSameVocab).
absl::StatusOr<KldStats> KlDivergence(EvalModel& base, EvalModel& model,
                                      const std::vector<int32_t>& tokens, const ChunkPlan& plan,
                                      int32_t batch, const ChunkCallback& on_chunk = nullptr);

}  // namespace tessera::eval
