// Token sampling from one row of logits.
//
// Order of operations (the same as llama.cpp's and vLLM's defaults):
//   penalties (repetition, presence, frequency) on the raw logits
//   -> greedy short-cut when temperature == 0
//   -> temperature -> top-k -> top-p -> min-p -> draw with the request's RNG.
// Logprobs are always reported from the unmodified model distribution
// (log-softmax of the raw logits), as OpenAI-style APIs do.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace tessera {

struct SamplingParams {
  float temperature = 1.0f;         // 0 means greedy; must be finite and >= 0
  int32_t top_k = 0;                // 0 disables; else keep the k most likely
  float top_p = 1.0f;               // in (0, 1]; 1 disables
  float min_p = 0.0f;               // in [0, 1]; 0 disables
  float repetition_penalty = 1.0f;  // > 0; 1 disables (CTRL-style, on prompt+output)
  float presence_penalty = 0.0f;    // in [-2, 2]; on output tokens only
  float frequency_penalty = 0.0f;   // in [-2, 2]; on output tokens only
  uint64_t seed = 0;                // used when has_seed
  bool has_seed = false;            // without a seed, the engine draws one
  int32_t top_logprobs = 0;         // 0..20 alternatives reported per token
  bool logprobs = false;            // report the chosen token's logprob
};

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int32_t token_id = 0;
  float logprob = 0.0f;               // of the chosen token, when requested
  std::vector<TokenLogprob> top;      // the top_logprobs most likely, descending
};

// Per-sequence sampling state: the RNG and the token counts the penalties use.
class SequenceSampler {
 public:
  SequenceSampler(const SamplingParams& params, std::span<const int32_t> prompt_ids,
                  int32_t vocab_size);

  // Samples the next token from `logits` ([vocab_size], modified in place:
  // penalties and temperature are applied to it). Deterministic for a given
  // seed, prompt and sequence of previously accepted tokens.
  SampledToken Sample(std::span<float> logits);

  // Records a token appended to the sequence (for the penalties).
  void Accept(int32_t token_id);

  const SamplingParams& params() const { return params_; }

 private:
  void ApplyPenalties(std::span<float> logits) const;
  // Samples from the temperature-scaled `logits` with top-k/top-p/min-p.
  int32_t SampleTruncated(std::span<const float> logits);
  // Draws from the full softmax of `logits`, whose maximum is `max_logit`.
  int32_t SamplePlain(std::span<const float> logits, float max_logit);
  // Fill scratch_ with (logit, id) candidates and return how many of them,
  // from the front, are in descending order.
  size_t CollectFinite(std::span<const float> logits);
  size_t SelectTopK(std::span<const float> logits, size_t k);
  // Truncates scratch_ (probabilities, first `sorted` in order) to the
  // smallest descending prefix whose mass reaches `target`.
  void KeepNucleus(double target, size_t sorted);
  // Fills `out` with the chosen token's logprob and the top alternatives,
  // from the raw logits saved in raw_.
  void FillLogprobs(SampledToken& out);
  double NextUniform();

  SamplingParams params_;
  int32_t vocab_size_;
  std::mt19937_64 rng_;
  std::vector<int32_t> seen_;           // [vocab]: 1 if in prompt or output
  std::vector<int32_t> output_counts_;  // [vocab]: occurrences in the output
  std::vector<std::pair<float, int32_t>> scratch_;  // candidate buffer, reused
  std::vector<int32_t> seen_ids_;       // distinct ids with seen_ set
  std::vector<int32_t> output_ids_;     // distinct ids with output_counts_ > 0
  std::vector<float> raw_;              // [vocab]: raw logits, when logprobs are asked
  std::vector<float> probs_;            // [vocab]: unnormalised probabilities
};

}  // namespace tessera
