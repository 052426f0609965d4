// The stories260K reference generation (tests/data/reference/), read by the
// CPU golden tests and the GPU parity tests.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "testing/engine_harness.h"

namespace tessera::testing {

struct Golden {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;  // greedy continuation
  std::string generated_text;
  std::vector<float> step0_logits;     // [vocab] after the prompt
};

inline Golden LoadGolden() {
  auto j = nlohmann::json::parse(
      ReadFile(SourcePath("tests/data/reference/stories260K-once-upon-a-time.json")));
  return Golden{j["prompt_ids"].get<std::vector<int32_t>>(),
                j["generated_ids"].get<std::vector<int32_t>>(),
                j["generated_text"].get<std::string>(),
                j["step0_logits"].get<std::vector<float>>()};
}

}  // namespace tessera::testing
