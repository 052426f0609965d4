// The GGUF tensors and the attention factor of rope frequency scaling, in
// one place for everything that reads or writes them: the model config,
// tessera-make-model, and the Hugging Face folder reader and writer.
#pragma once

#include <cmath>
#include <string_view>

namespace tessera {

// Llama 3.1/3.2 ("llama3" rope type): one factor per rotated pair, dividing
// its frequency.
inline constexpr char kRopeFreqsTensor[] = "rope_freqs.weight";
// Phi-3 long-rope: factors for contexts past the training context, and for
// contexts within it.
inline constexpr char kRopeFactorsLongTensor[] = "rope_factors_long.weight";
inline constexpr char kRopeFactorsShortTensor[] = "rope_factors_short.weight";

// Whether `name` is one of the tensors above: per-dimension factors that
// are no weight of a layer (folders keep them in config.json instead).
inline bool IsRopeFactorTensor(std::string_view name) {
  return name == kRopeFreqsTensor || name == kRopeFactorsLongTensor ||
         name == kRopeFactorsShortTensor;
}

// Phi-3 long-rope's factor on cos and sin, as convert_hf_to_gguf.py writes
// it: sqrt(1 + ln(s) / ln(original)) for s = context / original > 1, else 1.
inline double LongRopeAttnFactor(double context, double original) {
  const double scale = context / original;
  return scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(original)) : 1.0;
}

}  // namespace tessera
