// tessera-eval's output: llama-perplexity-style text and a JSON object.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "tools/eval/eval_stats.h"

namespace tessera::eval {

struct RunInfo {
  std::string base_path;  // empty for ppl
  std::string model_path;
  size_t num_tokens = 0;  // tokens of the text
  ChunkPlan plan;
  double seconds = 0;
};

nlohmann::json PerplexityJson(const PerplexityStats& stats, const RunInfo& info);
std::string PerplexityText(const PerplexityStats& stats, const RunInfo& info);

// `stats` has its value lists sorted (KlDivergence sorts them).
nlohmann::json KldJson(const KldStats& stats, const RunInfo& info);
std::string KldText(const KldStats& stats, const RunInfo& info);

}  // namespace tessera::eval
