#include "engine/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using Candidate = std::pair<float, int32_t>;

// Strict total order: larger value first, then lower id, so selection and
// sorting give the same result on every standard library.
bool Better(const Candidate& a, const Candidate& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// Largest value; -inf when empty or all NaN. Eight independent lanes let
// the compiler vectorise this without -ffast-math.
float MaxOf(std::span<const float> values) {
  constexpr size_t kLanes = 8;
  float lanes[kLanes];
  for (float& lane : lanes) lane = kNegInf;
  size_t i = 0;
  for (; i + kLanes <= values.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      lanes[j] = values[i + j] > lanes[j] ? values[i + j] : lanes[j];
    }
  }
  float m = kNegInf;
  for (float lane : lanes) m = lane > m ? lane : m;
  for (; i < values.size(); ++i) m = values[i] > m ? values[i] : m;
  return m;
}

// Index of the largest logit, lowest id among ties. NaN never wins; 0 when no
// logit is larger than -inf.
int32_t ArgMax(std::span<const float> logits) {
  const float m = MaxOf(logits);
  if (!(m > kNegInf)) return 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == m) return static_cast<int32_t>(i);
  }
  return 0;
}

// Sorts scratch[from, to) into Better order, given that every element there
// precedes (or equals) every element of scratch[to, end) after the call.
void SortRange(std::vector<Candidate>& scratch, size_t from, size_t to) {
  auto begin = scratch.begin();
  if (to < scratch.size()) {
    std::nth_element(begin + from, begin + to, scratch.end(), Better);
  }
  std::sort(begin + from, begin + to, Better);
}

}  // namespace

SequenceSampler::SequenceSampler(const SamplingParams& params,
                                 std::span<const int32_t> prompt_ids, int32_t vocab_size)
    : params_(params),
      vocab_size_(std::max(vocab_size, 0)),
      rng_(params.seed),
      seen_(vocab_size_, 0),
      output_counts_(vocab_size_, 0) {
  scratch_.reserve(vocab_size_);
  for (int32_t id : prompt_ids) {
    if (id < 0 || id >= vocab_size_ || seen_[id]) continue;
    seen_[id] = 1;
    seen_ids_.push_back(id);
  }
}

void SequenceSampler::Accept(int32_t token_id) {
  if (token_id < 0 || token_id >= vocab_size_) return;
  if (!seen_[token_id]) {
    seen_[token_id] = 1;
    seen_ids_.push_back(token_id);
  }
  if (output_counts_[token_id]++ == 0) output_ids_.push_back(token_id);
}

void SequenceSampler::ApplyPenalties(std::span<float> logits) const {
  const int32_t n = static_cast<int32_t>(logits.size());
  const float rep = params_.repetition_penalty;
  if (rep != 1.0f && rep > 0.0f) {
    for (int32_t id : seen_ids_) {
      if (id >= n) continue;
      float& l = logits[id];
      l = l > 0.0f ? l / rep : l * rep;
    }
  }
  const float presence = params_.presence_penalty;
  const float frequency = params_.frequency_penalty;
  if (presence != 0.0f || frequency != 0.0f) {
    for (int32_t id : output_ids_) {
      if (id >= n) continue;
      logits[id] -= presence + frequency * static_cast<float>(output_counts_[id]);
    }
  }
}

double SequenceSampler::NextUniform() {
  // 53 random bits -> [0, 1); the same on every standard library.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

SampledToken SequenceSampler::Sample(std::span<float> logits) {
  SampledToken out;
  if (logits.empty()) return out;
  const bool want_logprobs = params_.logprobs || params_.top_logprobs > 0;
  if (want_logprobs) raw_.assign(logits.begin(), logits.end());

  ApplyPenalties(logits);
  const float temperature = params_.temperature;
  if (!(temperature > 0.0f) || !std::isfinite(temperature)) {
    out.token_id = ArgMax(logits);
  } else {
    const float inv_t = 1.0f / temperature;
    // NaN would poison every sum below; it is treated as impossible.
    for (float& l : logits) l = std::isnan(l) ? kNegInf : l * inv_t;
    out.token_id = SampleTruncated(logits);
  }
  if (want_logprobs) FillLogprobs(out);
  return out;
}

int32_t SequenceSampler::SampleTruncated(std::span<const float> logits) {
  const float max_logit = MaxOf(logits);
  // All -inf, or a +inf logit: there is no proper distribution to draw from.
  if (!std::isfinite(max_logit)) return ArgMax(logits);

  const size_t n = logits.size();
  const bool top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n;
  const bool top_p = params_.top_p < 1.0f;
  const bool min_p = params_.min_p > 0.0f;
  if (!top_k && !top_p && !min_p) return SamplePlain(logits, max_logit);

  // Candidates become (unnormalised probability exp(l - max), id); exp is
  // monotone, so the Better order on them stays the order of the logits.
  size_t sorted = top_k ? SelectTopK(logits, static_cast<size_t>(params_.top_k))
                        : CollectFinite(logits);
  double total = 0.0;
  for (Candidate& c : scratch_) {
    c.first = std::exp(c.first - max_logit);
    total += c.first;
  }
  if (min_p) {
    // p / p_max >= min_p, and p_max is exp(0) = 1 here, so the top token
    // always survives. Compaction keeps the order, and the survivors of a
    // sorted prefix are a prefix of it.
    const float threshold = std::min(params_.min_p, 1.0f);
    size_t count = 0;
    for (const Candidate& c : scratch_) {
      if (c.first >= threshold) scratch_[count++] = c;
    }
    scratch_.resize(count);
    sorted = std::min(sorted, count);
  }
  // The nucleus mass is relative to the softmax over the top-k candidates.
  if (top_p) KeepNucleus(static_cast<double>(params_.top_p) * total, sorted);

  double sum = 0.0;
  for (const Candidate& c : scratch_) sum += c.first;
  const double target = NextUniform() * sum;
  double cum = 0.0;
  for (const Candidate& c : scratch_) {
    cum += c.first;
    if (cum > target) return c.second;
  }
  return scratch_.back().second;  // rounding left target just above the sum
}

int32_t SequenceSampler::SamplePlain(std::span<const float> logits, float max_logit) {
  probs_.resize(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    probs_[i] = std::exp(logits[i] - max_logit);
    sum += probs_[i];
  }
  const double target = NextUniform() * sum;
  double cum = 0.0;
  int32_t last = 0;
  for (size_t i = 0; i < probs_.size(); ++i) {
    if (probs_[i] <= 0.0f) continue;
    cum += probs_[i];
    last = static_cast<int32_t>(i);
    if (cum > target) return last;
  }
  return last;  // rounding left target just above the sum
}

size_t SequenceSampler::CollectFinite(std::span<const float> logits) {
  scratch_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > kNegInf) scratch_.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  return 0;
}

size_t SequenceSampler::SelectTopK(std::span<const float> logits, size_t k) {
  scratch_.clear();
  if (k > 1024) {
    CollectFinite(logits);
    k = std::min(k, scratch_.size());
    SortRange(scratch_, 0, k);
    scratch_.resize(k);
    return k;
  }
  // A heap of the k best so far, worst on top: most logits lose against the
  // top with a single comparison, so this is about one pass for small k.
  float worst = kNegInf;  // the heap's worst logit once it holds k
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!(logits[i] > worst)) continue;  // ties with the worst lose: higher id
    const Candidate c(logits[i], static_cast<int32_t>(i));
    if (scratch_.size() < k) {
      scratch_.push_back(c);
      std::push_heap(scratch_.begin(), scratch_.end(), Better);
    } else {
      std::pop_heap(scratch_.begin(), scratch_.end(), Better);
      scratch_.back() = c;
      std::push_heap(scratch_.begin(), scratch_.end(), Better);
    }
    if (scratch_.size() == k) worst = scratch_.front().first;
  }
  std::sort_heap(scratch_.begin(), scratch_.end(), Better);
  return scratch_.size();
}

void SequenceSampler::KeepNucleus(double target, size_t sorted) {
  // Sort only as much of the candidates as the nucleus needs, growing the
  // sorted prefix geometrically; a peaked distribution needs a few dozen.
  double cum = 0.0;
  for (size_t i = 0; i < scratch_.size(); ++i) {
    if (i == sorted) {
      const size_t next = std::min(scratch_.size(), std::max<size_t>(64, 2 * sorted));
      SortRange(scratch_, sorted, next);
      sorted = next;
    }
    cum += scratch_[i].first;
    if (cum >= target) {
      scratch_.resize(i + 1);
      return;
    }
  }
}

void SequenceSampler::FillLogprobs(SampledToken& out) {
  for (float& l : raw_) l = std::isnan(l) ? kNegInf : l;
  const float max_logit = MaxOf(raw_);
  double log_z = static_cast<double>(max_logit);
  if (std::isfinite(max_logit)) {
    double sum = 0.0;
    for (float l : raw_) sum += std::exp(l - max_logit);
    log_z += std::log(sum);
  }
  // When no logit is finite, every logprob is reported as -inf.
  auto logprob = [&](int32_t id) -> float {
    if (!std::isfinite(log_z)) return kNegInf;
    return static_cast<float>(static_cast<double>(raw_[id]) - log_z);
  };
  out.logprob = logprob(out.token_id);

  const size_t k = std::min(static_cast<size_t>(std::max(params_.top_logprobs, 0)), raw_.size());
  if (k == 0) return;
  scratch_.clear();
  for (size_t i = 0; i < raw_.size(); ++i) scratch_.emplace_back(raw_[i], static_cast<int32_t>(i));
  std::partial_sort(scratch_.begin(), scratch_.begin() + k, scratch_.end(), Better);
  out.top.reserve(k);
  for (size_t i = 0; i < k; ++i) {
    out.top.push_back({scratch_[i].second, logprob(scratch_[i].second)});
  }
}

}  // namespace tessera
