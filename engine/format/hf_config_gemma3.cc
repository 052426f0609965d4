// Gemma 3's multimodal folders (Gemma3ForConditionalGeneration: 4B, 12B,
// 27B): config.json model_type "gemma3" holds the language model's settings
// in "text_config", which omits those equal to transformers'
// Gemma3TextConfig defaults; the checkpoint holds the language model under
// a prefix, beside the vision tower and its projector. Tessera serves the
// text part, as llama.cpp's GGUF conversion of these folders does.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/format/hf_config.h"

namespace tessera {

absl::StatusOr<nlohmann::json> Gemma3TextConfigOf(const nlohmann::json& config) {
  using json = nlohmann::json;
  const auto it = config.find("text_config");
  if (it == config.end() || !it->is_object()) {
    return absl::InvalidArgumentError(
        "config.json model_type \"gemma3\" needs a \"text_config\" object");
  }
  // transformers' Gemma3TextConfig defaults for the keys the engine reads.
  json text = {{"vocab_size", 262208},
               {"hidden_size", 2304},
               {"intermediate_size", 9216},
               {"num_hidden_layers", 26},
               {"num_attention_heads", 8},
               {"num_key_value_heads", 4},
               {"head_dim", 256},
               {"hidden_activation", "gelu_pytorch_tanh"},
               {"max_position_embeddings", 131072},
               {"rms_norm_eps", 1e-6},
               {"tie_word_embeddings", true},
               {"rope_theta", 1000000.0},
               {"query_pre_attn_scalar", 256},
               {"sliding_window", 4096},
               {"rope_local_base_freq", 10000.0},
               {"sliding_window_pattern", 6}};
  for (const auto& [key, value] : it->items()) text[key] = value;
  if (text.value("model_type", std::string("gemma3_text")) != "gemma3_text") {
    return absl::UnimplementedError(absl::StrCat(
        "config.json text_config model_type ", text["model_type"].dump(),
        " is not supported (gemma3_text)"));
  }
  text["model_type"] = "gemma3_text";
  return text;
}

std::string Gemma3TextTensorName(const std::string& name) {
  for (const char* prefix : {"language_model.model.", "model.language_model."}) {
    if (absl::StartsWith(name, prefix)) return "model." + name.substr(std::string(prefix).size());
  }
  if (absl::StartsWith(name, "language_model.lm_head.")) return name.substr(15);
  for (const char* prefix : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                             "model.multi_modal_projector."}) {
    if (absl::StartsWith(name, prefix)) return "";
  }
  return name;
}

}  // namespace tessera
