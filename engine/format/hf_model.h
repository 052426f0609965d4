// Opening a model: a GGUF file, or a Hugging Face folder (config.json,
// tokenizer.json, tokenizer_config.json, optional generation_config.json,
// model.safetensors or shards listed in model.safetensors.index.json)
// presented as an in-memory GgufFile with llama.cpp's names and keys.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/gguf.h"

namespace tessera {

struct ModelSource {
  std::unique_ptr<GgufFile> file;
  std::string format;  // "gguf" | "hf"
  // Hugging Face folders only:
  std::string tokenizer_json;          // tokenizer.json text
  std::string tokenizer_config_json;   // tokenizer_config.json text ("" when absent)
  std::vector<int32_t> eos_token_ids;  // generation_config.json eos_token_id (int or list)
};

// A directory is read as a Hugging Face folder, anything else as GGUF.
absl::StatusOr<ModelSource> OpenModelSource(const std::string& path);

// The folder's weights and config only (no tokenizer files needed).
absl::StatusOr<std::unique_ptr<GgufFile>> OpenHfWeights(const std::string& dir);

// generation_config.json's eos_token_id: an integer or a list of them.
absl::StatusOr<std::vector<int32_t>> ParseGenerationEos(std::string_view json_text);

}  // namespace tessera
