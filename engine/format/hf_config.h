// A Hugging Face config.json, validated and turned into the GGUF metadata
// llama.cpp's convert_hf_to_gguf.py writes for the same model.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/gguf.h"
#include "nlohmann/json.hpp"

namespace tessera {

// What differs between the supported families, as data.
struct HfArch {
  std::string_view model_type;  // config.json "model_type"
  std::string_view gguf_arch;   // general.architecture
  bool permute_qk;              // Q/K rows go from HF's rotate-halves order to adjacent pairs
  bool norm_plus_one;           // norm weights are stored as 1 + w (gemma)
  bool qkv_bias;                // q/k/v projections have biases (qwen2)
  bool qk_norm;                 // per-head RMSNorm of q and k (qwen3, gemma3)
  bool fused;                   // qkv_proj and gate_up_proj (phi3)
  bool sandwich_norms;          // norms after attention and MLP too (gemma3)
  bool tied_by_default;         // tie_word_embeddings when config.json omits it
};

// The families understood; nullptr for any other model_type.
const HfArch* FindHfArch(std::string_view model_type);
const HfArch* FindHfArchByGguf(std::string_view gguf_arch);

using GgufMetadata = std::map<std::string, GgufValue, std::less<>>;

struct HfModelConfig {
  const HfArch* arch = nullptr;
  uint32_t vocab_size = 0;
  uint32_t hidden = 0;
  uint32_t layers = 0;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t ffn = 0;
  uint32_t head_dim = 0;  // config "head_dim", or hidden / heads
  bool tied = false;      // the output head may reuse the token embedding
  GgufMetadata metadata;  // general.architecture and every {arch}.* key
  // F32 vectors the converter derives from rope_scaling, by GGUF tensor
  // name: rope_freqs.weight (Llama 3.1's "llama3" factors, [head_dim / 2]),
  // or rope_factors_long.weight and rope_factors_short.weight (Phi-3's
  // "longrope").
  std::map<std::string, std::vector<float>> extra_tensors;
  // A Gemma 3 multimodal folder: tensor names go through Gemma3TextTensorName.
  bool gemma3_multimodal = false;
};

// Validates config.json (types, ranges, divisibility) and refuses a
// model_type, rope_scaling type or computation-changing key that is not
// implemented, with an error naming it. A Gemma 3 multimodal config
// (model_type "gemma3") is read as its text part (hf_config_gemma3.cc).
absl::StatusOr<HfModelConfig> ParseHfConfig(std::string_view config_json);

// Gemma 3 multimodal folders (hf_config_gemma3.cc): the "text_config" of a
// model_type "gemma3" config.json with transformers' defaults filled in, as
// a gemma3_text config; and a checkpoint tensor's name in the text model
// ("language_model.model.X" or "model.language_model.X" → "model.X",
// "language_model.lm_head.X" → "lm_head.X"), "" for the vision tower and
// projector, which are not read.
absl::StatusOr<nlohmann::json> Gemma3TextConfigOf(const nlohmann::json& config);
std::string Gemma3TextTensorName(const std::string& name);

// The frequency factors of a config.json rope_scaling object of rope_type
// "llama3" for a rotary dimension `dim` and base `base`, as
// convert_hf_to_gguf.py computes them (F32, [dim / 2]).
absl::StatusOr<std::vector<float>> HfLlama3RopeFactors(const nlohmann::json& rope_scaling,
                                                       double base, uint32_t dim);

// Metadata value helpers (the types gguf-py's writer uses).
GgufValue GgufU32(uint64_t v);
GgufValue GgufF32(double v);
GgufValue GgufStr(std::string v);

}  // namespace tessera
