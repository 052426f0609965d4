// Writes a GGUF model (a file, or the view of a folder) as a Hugging Face
// folder: config.json, model.safetensors (or shards with an index),
// generation_config.json, and copies of tokenizer files when given. The
// inverse of the folder loader: names back to HF, llama Q/K rows back to
// rotate-halves order, gemma norms stored as w rather than 1 + w.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/model/gguf.h"
#include "nlohmann/json.hpp"

namespace tessera {

struct HfWriteOptions {
  // Largest shard in bytes of tensor data; 0 writes one model.safetensors.
  uint64_t shard_size = 0;
  std::string tokenizer_json;    // path of a tokenizer.json to copy, or ""
  std::string tokenizer_config;  // path of a tokenizer_config.json to copy, or ""
};

// config.json for the file's metadata; UNIMPLEMENTED for an architecture
// or a key (e.g. rope_freqs.weight) with no HF equivalent here.
absl::StatusOr<nlohmann::json> HfConfigFromGguf(const GgufFile& file);

// Creates `dir` (it must not exist or be empty) and writes the folder.
absl::Status WriteHfFolder(const GgufFile& file, const std::string& dir,
                           const HfWriteOptions& options);

}  // namespace tessera
