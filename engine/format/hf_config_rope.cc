// config.json rope_scaling, sliding windows and family-specific keys.
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "engine/format/hf_config.h"
#include "engine/model/gemma3_rules.h"
#include "engine/model/rope_tensors.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

using json = nlohmann::json;

absl::StatusOr<double> PositiveNumber(const json& obj, const char* key, double fallback) {
  if (!obj.contains(key) || obj[key].is_null()) return fallback;
  const json& v = obj[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json rope_scaling \"", key, "\" must be a positive number"));
  }
  return v.get<double>();
}

// rope_scaling's long_factor or short_factor: head_dim / 2 positive numbers.
absl::StatusOr<std::vector<float>> LongRopeFactors(const json& rs, const char* key,
                                                   uint32_t head_dim) {
  const std::string where = absl::StrCat("config.json rope_scaling \"", key, "\"");
  if (!rs.contains(key) || !rs[key].is_array() || rs[key].size() != head_dim / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " must be an array of head_dim / 2 = ", head_dim / 2, " numbers"));
  }
  std::vector<float> out;
  for (const json& v : rs[key]) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(where, " must hold positive numbers"));
    }
    out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

// Phi-3's "longrope" (or "su"), as Phi3MiniModel in convert_hf_to_gguf.py
// writes it: the factors as rope_factors_long/short.weight, and the
// attention factor sqrt(1 + ln(s) / ln(original)) for s = context / original
// (1 when s <= 1). Per-set mscales (Phi-3.5-MoE) are not implemented.
absl::Status AddLongRope(const json& config, const json& rs, HfModelConfig& m) {
  for (const char* key : {"long_mscale", "short_mscale"}) {
    if (rs.contains(key) && !rs[key].is_null()) {
      return absl::UnimplementedError(
          absl::StrCat("config.json rope_scaling \"", key, "\" is not supported"));
    }
  }
  auto long_f = LongRopeFactors(rs, "long_factor", m.head_dim);
  if (!long_f.ok()) return long_f.status();
  auto short_f = LongRopeFactors(rs, "short_factor", m.head_dim);
  if (!short_f.ok()) return short_f.status();
  const json* o = config.contains("original_max_position_embeddings")
                      ? &config["original_max_position_embeddings"]
                      : nullptr;
  const double context =
      static_cast<double>(std::get<uint64_t>(m.metadata.at("phi3.context_length").value));
  if (o == nullptr || !o->is_number_unsigned() || o->get<uint64_t>() == 0 ||
      o->get<uint64_t>() > context) {
    return absl::InvalidArgumentError(
        "config.json longrope needs original_max_position_embeddings in [1, "
        "max_position_embeddings]");
  }
  const double attn = LongRopeAttnFactor(context, static_cast<double>(o->get<uint64_t>()));
  m.metadata["phi3.rope.scaling.attn_factor"] = GgufF32(attn);
  m.extra_tensors[kRopeFactorsLongTensor] = *std::move(long_f);
  m.extra_tensors[kRopeFactorsShortTensor] = *std::move(short_f);
  return absl::OkStatus();
}

}  // namespace

// convert_hf_to_gguf.py LlamaModel.generate_extra_tensors, in float32 as
// torch computes it there.
absl::StatusOr<std::vector<float>> HfLlama3RopeFactors(const json& rs, double base, uint32_t dim) {
  auto factor = PositiveNumber(rs, "factor", 8.0);
  auto low = PositiveNumber(rs, "low_freq_factor", 1.0);
  auto high = PositiveNumber(rs, "high_freq_factor", 4.0);
  auto old_ctx = PositiveNumber(rs, "original_max_position_embeddings", 8192);
  for (const auto* s : {&factor, &low, &high, &old_ctx}) {
    if (!s->ok()) return s->status();
  }
  const float low_wavelen = static_cast<float>(*old_ctx / *low);
  const float high_wavelen = static_cast<float>(*old_ctx / *high);
  if (low_wavelen == high_wavelen) {
    return absl::InvalidArgumentError(
        "config.json rope_scaling low_freq_factor equals high_freq_factor");
  }
  std::vector<float> out;
  for (uint32_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(base), static_cast<float>(i) / dim);
    const float wavelen = static_cast<float>(2 * std::numbers::pi) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(*factor));
    } else {
      const float smooth = (static_cast<float>(*old_ctx) / wavelen - static_cast<float>(*low)) /
                           static_cast<float>(*high - *low);
      out.push_back(1.0f / ((1 - smooth) / static_cast<float>(*factor) + smooth));
    }
  }
  return out;
}

namespace {

absl::Status AddRopeScaling(const json& config, HfModelConfig& m) {
  if (!config.contains("rope_scaling") || config["rope_scaling"].is_null()) {
    return absl::OkStatus();
  }
  const json& rs = config["rope_scaling"];
  if (!rs.is_object())
    return absl::InvalidArgumentError("config.json rope_scaling is not an object");
  const char* type_key = rs.contains("rope_type") ? "rope_type" : "type";
  if (!rs.contains(type_key) || !rs[type_key].is_string()) {
    return absl::InvalidArgumentError("config.json rope_scaling has no \"rope_type\" string");
  }
  const std::string type = rs[type_key].get<std::string>();
  const std::string p(m.arch->gguf_arch);
  if (type == "default") return absl::OkStatus();
  const bool linear_ok = p == "llama" || p == "gemma3";
  const bool yarn_ok = p == "qwen2" || p == "qwen3";
  if (type == "llama3" && p == "llama") {
    double base = 10000.0;
    if (config.contains("rope_theta") && config["rope_theta"].is_number()) {
      base = config["rope_theta"].get<double>();
    }
    auto factors = HfLlama3RopeFactors(rs, base, m.head_dim);
    if (!factors.ok()) return factors.status();
    m.extra_tensors[kRopeFreqsTensor] = std::move(*factors);
    return absl::OkStatus();
  }
  if ((type == "longrope" || type == "su") && p == "phi3") return AddLongRope(config, rs, m);
  if ((type == "linear" && linear_ok) || (type == "yarn" && yarn_ok)) {
    auto factor = PositiveNumber(rs, "factor", 0);
    if (!factor.ok()) return factor.status();
    if (*factor == 0) return absl::InvalidArgumentError("config.json rope_scaling has no factor");
    m.metadata[p + ".rope.scaling.type"] = GgufStr(type);
    m.metadata[p + ".rope.scaling.factor"] = GgufF32(*factor);
    if (type == "yarn") {
      auto orig = PositiveNumber(rs, "original_max_position_embeddings", 0);
      if (!orig.ok()) return orig.status();
      if (*orig != 0) m.metadata[p + ".rope.scaling.original_context_length"] = GgufU32(*orig);
    }
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("config.json rope_scaling type \"", type,
                                               "\" is not supported for ",
                                               std::string(m.arch->model_type)));
}

absl::StatusOr<uint64_t> WindowValue(const json& config, const char* key, bool required) {
  if (!config.contains(key) || config[key].is_null()) {
    if (required) {
      return absl::InvalidArgumentError(absl::StrCat("config.json \"", key, "\" is missing"));
    }
    return 0;
  }
  if (!config[key].is_number_unsigned() || config[key].get<uint64_t>() > (1u << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json \"", key, "\" must be a non-negative integer below 2^24"));
  }
  return config[key].get<uint64_t>();
}

}  // namespace

absl::Status AddRopeAndWindow(const json& config, HfModelConfig& m) {
  if (auto s = AddRopeScaling(config, m); !s.ok()) return s;
  const std::string p(m.arch->gguf_arch);
  if (p == "phi3") {
    auto window = WindowValue(config, "sliding_window", false);
    if (!window.ok()) return window.status();
    m.metadata["phi3.attention.sliding_window"] = GgufU32(*window);
    auto orig = WindowValue(config, "original_max_position_embeddings", false);
    if (!orig.ok()) return orig.status();
    if (*orig != 0) m.metadata["phi3.rope.scaling.original_context_length"] = GgufU32(*orig);
  }
  if (m.arch->model_type == "mistral") {
    // Mistral 7B v0.1 attends to the last sliding_window keys on every
    // layer; llama.cpp computes full attention. The two agree while the
    // context is no longer than the window, so the context stops there.
    auto window = WindowValue(config, "sliding_window", false);
    if (!window.ok()) return window.status();
    GgufValue& ctx = m.metadata["llama.context_length"];
    if (*window != 0 && *window < std::get<uint64_t>(ctx.value)) ctx = GgufU32(*window);
  }
  if (p == "gemma3") {
    auto window = WindowValue(config, "sliding_window", true);
    if (!window.ok()) return window.status();
    m.metadata["gemma3.attention.sliding_window"] = GgufU32(*window);
    // tanh soft-capping of the logits, as convert_hf_to_gguf.py writes it.
    if (config.contains("final_logit_softcapping") &&
        !config["final_logit_softcapping"].is_null()) {
      const json& cap = config["final_logit_softcapping"];
      if (!cap.is_number() || !std::isfinite(cap.get<double>()) || cap.get<double>() <= 0) {
        return absl::InvalidArgumentError(
            "config.json \"final_logit_softcapping\" must be a positive number or null");
      }
      m.metadata["gemma3.final_logit_softcapping"] = GgufF32(cap.get<double>());
    }
    auto scalar = WindowValue(config, "query_pre_attn_scalar", false);
    if (!scalar.ok()) return scalar.status();
    const uint32_t expected = Gemma3QueryPreAttnScalar(m.layers, m.hidden, m.heads, m.head_dim);
    if (*scalar != 0 && *scalar != expected) {
      return absl::UnimplementedError(absl::StrCat(
          "config.json \"query_pre_attn_scalar\" = ", *scalar, " differs from ", expected,
          " (llama.cpp takes head_dim, or hidden_size / num_attention_heads for 62 layers)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
