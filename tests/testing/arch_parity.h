// The llama.cpp parity cases of tests/data/arch_parity: each case's model is
// rebuilt with tessera-make-model and the exact flags llama.cpp's reference
// came from.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "testing/engine_harness.h"
#include "testing/temp_model.h"

namespace tessera::testing {

struct ParityCase {
  std::string model_path;  // empty when the model could not be written
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;  // llama.cpp's greedy tokens
  int32_t context = 0;  // llama-server's -c where the case sets one (0: the model's)
  // Step → llama.cpp's most likely token where ignore_eos masked it (EOS):
  // Tessera keeps EOS sampleable, picks it there, and the texts part.
  std::map<size_t, int32_t> unmasked_top_ids;
};

// The number of leading tokens `got` shares with the case's reference, or
// -1 when they part other than at an EOS that llama.cpp's ignore_eos masked
// (where `got` must then hold llama.cpp's unmasked choice).
inline int64_t MatchingPrefix(const ParityCase& c, const std::vector<int32_t>& got) {
  for (size_t i = 0; i < c.generated_ids.size(); ++i) {
    if (i < got.size() && got[i] == c.generated_ids[i]) continue;
    auto it = c.unmasked_top_ids.find(i);
    return it != c.unmasked_top_ids.end() && i < got.size() && got[i] == it->second
               ? static_cast<int64_t>(i)
               : -1;
  }
  return got.size() == c.generated_ids.size() ? static_cast<int64_t>(got.size()) : -1;
}

inline std::vector<std::string> ParityCaseNames() {
  return {"llama3",    "llama_tied", "qwen2",         "qwen3",
          "phi3",      "gemma3",     "qwen2_f16",     "gemma3_f16",
          "phi3_longrope", "phi3_longrope_short"};
}

inline ParityCase LoadParityCase(const std::string& name) {
  const nlohmann::json ref = nlohmann::json::parse(
      ReadFile(SourcePath("tests/data/arch_parity/" + name + ".json")));
  ParityCase c;
  c.prompt_ids = ref["prompt_ids"].get<std::vector<int32_t>>();
  c.generated_ids = ref["generated_ids"].get<std::vector<int32_t>>();
  if (ref.contains("context")) c.context = ref["context"].get<int32_t>();
  if (ref.contains("unmasked_top_ids")) {
    for (const auto& [step, id] : ref["unmasked_top_ids"].items()) {
      c.unmasked_top_ids[std::stoul(step)] = id.get<int32_t>();
    }
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera-parity-" + name + "-" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  ProcessTempFiles().Add(path);
  std::string command = std::string(TESSERA_BINARY_DIR) + "/tools/tessera-make-model";
  std::string previous;
  for (const auto& arg : ref["make_model_args"]) {
    // The vocab path is relative to the repository root.
    const std::string a = previous == "--vocab-from" ? SourcePath(arg.get<std::string>())
                                                     : arg.get<std::string>();
    command += " '" + a + "'";
    previous = arg.get<std::string>();
  }
  command += " --out '" + path + "' > /dev/null";
  if (std::system(command.c_str()) == 0) c.model_path = path;
  return c;
}

}  // namespace tessera::testing
