// config.json → HfModelConfig, following convert_hf_to_gguf.py's
// set_gguf_parameters for each supported family.
#include "engine/format/hf_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/format/json_strict.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// Same bound as the GGUF config reader: guards int32 index arithmetic.
constexpr uint64_t kMaxDim = 1u << 20;
constexpr uint64_t kMaxVocab = 1u << 24;
constexpr uint64_t kMaxContext = 1u << 24;

constexpr HfArch kArches[] = {
    // model_type, gguf, permute, +1, qkv_bias, qk_norm, fused, sandwich, tied
    {"llama", "llama", true, false, false, false, false, false, false},
    // MistralForCausalLM: Llama's layers (convert_hf_to_gguf.py writes it as
    // llama), with a sliding window in v0.1's config (AddRopeAndWindow).
    {"mistral", "llama", true, false, false, false, false, false, false},
    {"qwen2", "qwen2", false, false, true, false, false, false, false},
    {"qwen3", "qwen3", false, false, false, true, false, false, false},
    {"phi3", "phi3", false, false, false, false, true, false, false},
    {"gemma3_text", "gemma3", false, true, false, true, false, true, true},
};

absl::Status Bad(const std::string& key, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("config.json \"", key, "\" ", message));
}

// Typed access to the config object with messages naming the key.
class Config {
 public:
  explicit Config(const json& j) : j_(j) {}
  bool Has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }

  absl::StatusOr<uint32_t> Uint(const std::string& key, uint64_t max) const {
    if (!Has(key)) return Bad(key, "is missing");
    return UintValue(key, j_[key], max);
  }
  absl::StatusOr<uint32_t> UintOr(const std::string& key, uint64_t max, uint32_t fallback) const {
    return Has(key) ? UintValue(key, j_[key], max) : fallback;
  }
  absl::StatusOr<double> Float(const std::string& key) const {
    if (!Has(key)) return Bad(key, "is missing");
    return FloatValue(key, j_[key]);
  }
  absl::StatusOr<double> FloatOr(const std::string& key, double fallback) const {
    return Has(key) ? FloatValue(key, j_[key]) : fallback;
  }
  absl::StatusOr<bool> BoolOr(const std::string& key, bool fallback) const {
    if (!Has(key)) return fallback;
    if (!j_[key].is_boolean()) return Bad(key, "must be true or false");
    return j_[key].get<bool>();
  }
  absl::StatusOr<std::string> StringOr(const std::string& key, std::string fallback) const {
    if (!Has(key)) return fallback;
    if (!j_[key].is_string()) return Bad(key, "must be a string");
    return j_[key].get<std::string>();
  }
  const json& raw(const std::string& key) const { return j_[key]; }

  static absl::StatusOr<uint32_t> UintValue(const std::string& key, const json& v, uint64_t max) {
    if (!v.is_number_unsigned())
      return Bad(key, absl::StrCat("must be a positive integer, not ", v.dump()));
    const uint64_t n = v.get<uint64_t>();
    if (n == 0 || n > max)
      return Bad(key, absl::StrCat("= ", n, " is out of range [1, ", max, "]"));
    return static_cast<uint32_t>(n);
  }
  static absl::StatusOr<double> FloatValue(const std::string& key, const json& v) {
    if (!v.is_number()) return Bad(key, absl::StrCat("must be a number, not ", v.dump()));
    const double d = v.get<double>();
    if (!std::isfinite(d)) return Bad(key, "must be finite");
    return d;
  }

 private:
  const json& j_;
};

absl::Status ReadSizes(const Config& c, HfModelConfig& m) {
  auto assign = [&](uint32_t& out, const char* key, uint64_t max) -> absl::Status {
    auto v = c.Uint(key, max);
    if (!v.ok()) return v.status();
    out = *v;
    return absl::OkStatus();
  };
  if (auto s = assign(m.hidden, "hidden_size", kMaxDim); !s.ok()) return s;
  if (auto s = assign(m.layers, "num_hidden_layers", kMaxDim); !s.ok()) return s;
  if (auto s = assign(m.heads, "num_attention_heads", kMaxDim); !s.ok()) return s;
  if (auto s = assign(m.ffn, "intermediate_size", kMaxDim); !s.ok()) return s;
  if (auto s = assign(m.vocab_size, "vocab_size", kMaxVocab); !s.ok()) return s;
  const uint32_t default_kv = m.arch->gguf_arch == "gemma3" ? 4 : m.heads;
  auto kv = c.UintOr("num_key_value_heads", kMaxDim, default_kv);
  if (!kv.ok()) return kv.status();
  m.kv_heads = *kv;
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    return Bad("num_key_value_heads",
               absl::StrCat("= ", m.kv_heads, " does not divide num_attention_heads = ", m.heads));
  }
  const bool has_head_dim = c.Has("head_dim") || m.arch->gguf_arch == "gemma3";
  if (!has_head_dim && m.hidden % m.heads != 0) {
    return Bad("num_attention_heads",
               absl::StrCat("= ", m.heads, " does not divide hidden_size = ", m.hidden));
  }
  auto head_dim = c.UintOr("head_dim", kMaxDim, has_head_dim ? 256 : m.hidden / m.heads);
  if (!head_dim.ok()) return head_dim.status();
  m.head_dim = *head_dim;
  if (m.head_dim % 2 != 0) return Bad("head_dim", "must be even (RoPE rotates pairs)");
  if (uint64_t{m.head_dim} * m.heads > kMaxDim) return Bad("head_dim", "times heads is too large");
  auto tied = c.BoolOr("tie_word_embeddings", m.arch->tied_by_default);
  if (!tied.ok()) return tied.status();
  m.tied = *tied;
  return absl::OkStatus();
}

// transformers' per-layer attention kinds: every layer "full_attention",
// or for Gemma 3 the pattern of sliding_window_pattern (each pattern-th
// layer full, the others "sliding_attention"), which is what the engine
// computes. Anything else is refused.
absl::Status CheckLayerTypes(const Config& c, const HfArch& arch, uint64_t pattern) {
  if (!c.Has("layer_types")) return absl::OkStatus();
  const json& types = c.raw("layer_types");
  auto layers = c.Uint("num_hidden_layers", kMaxDim);
  if (!layers.ok()) return layers.status();
  if (!types.is_array() || types.size() != *layers) {
    return Bad("layer_types", "must be an array of one string per layer");
  }
  const bool gemma = arch.gguf_arch == "gemma3";
  for (size_t i = 0; i < types.size(); ++i) {
    if (!types[i].is_string()) return Bad("layer_types", "must be an array of strings");
    const bool full = !gemma || (i + 1) % pattern == 0;
    const char* want = full ? "full_attention" : "sliding_attention";
    if (types[i].get<std::string>() != want) {
      return absl::UnimplementedError(absl::StrCat(
          "config.json \"layer_types\"[", i, "] = ", types[i].dump(), " is not supported for ",
          std::string(arch.model_type), " (this layer must be \"", want, "\")"));
    }
  }
  return absl::OkStatus();
}

// Keys whose non-default values change the computation in ways the
// supported families do not implement.
absl::Status RefuseUnsupported(const Config& c, const HfArch& arch) {
  for (const char* key : {"attention_bias", "mlp_bias", "use_sliding_window"}) {
    auto v = c.BoolOr(key, false);
    if (!v.ok()) return v.status();
    if (*v && !(arch.qkv_bias && std::string_view(key) == "attention_bias")) {
      return absl::UnimplementedError(
          absl::StrCat("config.json \"", key, "\": true is not supported"));
    }
  }
  const bool gemma = arch.gguf_arch == "gemma3";
  auto act =
      c.StringOr(gemma ? "hidden_activation" : "hidden_act", gemma ? "gelu_pytorch_tanh" : "silu");
  if (!act.ok()) return act.status();
  if (*act != (gemma ? "gelu_pytorch_tanh" : "silu")) {
    return absl::UnimplementedError(absl::StrCat("config.json activation \"", *act,
                                                 "\" is not supported for ",
                                                 std::string(arch.model_type)));
  }
  if (arch.gguf_arch == "phi3") {
    auto partial = c.FloatOr("partial_rotary_factor", 1.0);
    if (!partial.ok()) return partial.status();
    if (*partial != 1.0) {
      return absl::UnimplementedError("config.json \"partial_rotary_factor\" other than 1");
    }
  }
  if (!gemma) return CheckLayerTypes(c, arch, 1);
  // final_logit_softcapping is kept (AddRopeAndWindow); Gemma 2's
  // attention soft-capping is not implemented.
  if (c.Has("attn_logit_softcapping")) {
    return absl::UnimplementedError("config.json \"attn_logit_softcapping\" is not supported");
  }
  auto local = c.FloatOr("rope_local_base_freq", 10000.0);
  if (!local.ok()) return local.status();
  if (*local != 10000.0) {
    return absl::UnimplementedError("config.json \"rope_local_base_freq\" other than 10000");
  }
  auto pattern = c.UintOr("sliding_window_pattern", 1024, 6);
  if (!pattern.ok()) return pattern.status();
  if (*pattern != 6)
    return absl::UnimplementedError("config.json \"sliding_window_pattern\" other than 6");
  return CheckLayerTypes(c, arch, *pattern);
}

}  // namespace

GgufValue GgufU32(uint64_t v) {
  GgufValue g;
  g.type = GgufValueType::kUint32;
  g.value = v;
  return g;
}

GgufValue GgufF32(double v) {
  GgufValue g;
  g.type = GgufValueType::kFloat32;
  g.value = static_cast<double>(static_cast<float>(v));
  return g;
}

GgufValue GgufStr(std::string v) {
  GgufValue g;
  g.type = GgufValueType::kString;
  g.value = std::move(v);
  return g;
}

const HfArch* FindHfArch(std::string_view model_type) {
  for (const HfArch& a : kArches) {
    if (a.model_type == model_type) return &a;
  }
  return nullptr;
}

const HfArch* FindHfArchByGguf(std::string_view gguf_arch) {
  for (const HfArch& a : kArches) {
    if (a.gguf_arch == gguf_arch) return &a;
  }
  return nullptr;
}

// Defined in hf_config_rope.cc.
absl::Status AddRopeAndWindow(const nlohmann::json& config, HfModelConfig& m);

namespace {

absl::Status AddCommonMetadata(const Config& c, HfModelConfig& m) {
  const std::string p(m.arch->gguf_arch);
  const bool gemma = p == "gemma3";
  GgufMetadata& md = m.metadata;
  md["general.architecture"] = GgufStr(p);
  md[p + ".block_count"] = GgufU32(m.layers);
  auto ctx = gemma ? c.UintOr("max_position_embeddings", kMaxContext, 131072)
                   : c.Uint("max_position_embeddings", kMaxContext);
  if (!ctx.ok()) return ctx.status();
  md[p + ".context_length"] = GgufU32(*ctx);
  md[p + ".embedding_length"] = GgufU32(m.hidden);
  md[p + ".feed_forward_length"] = GgufU32(m.ffn);
  md[p + ".attention.head_count"] = GgufU32(m.heads);
  if (c.Has("num_key_value_heads") || gemma)
    md[p + ".attention.head_count_kv"] = GgufU32(m.kv_heads);
  auto theta = gemma ? c.FloatOr("rope_theta", 1e6) : c.FloatOr("rope_theta", 10000.0);
  if (!theta.ok()) return theta.status();
  if (!(*theta > 0)) return Bad("rope_theta", "must be positive");
  if (c.Has("rope_theta") || gemma) md[p + ".rope.freq_base"] = GgufF32(*theta);
  auto eps = gemma ? c.FloatOr("rms_norm_eps", 1e-6) : c.Float("rms_norm_eps");
  if (!eps.ok()) return eps.status();
  if (!(*eps > 0 && *eps < 1)) return Bad("rms_norm_eps", "must be in (0, 1)");
  md[p + ".attention.layer_norm_rms_epsilon"] = GgufF32(*eps);
  if (c.Has("head_dim") || gemma) {
    md[p + ".attention.key_length"] = GgufU32(m.head_dim);
    md[p + ".attention.value_length"] = GgufU32(m.head_dim);
  }
  if (p == "llama" || p == "phi3") md[p + ".rope.dimension_count"] = GgufU32(m.head_dim);
  md[p + ".vocab_size"] = GgufU32(m.vocab_size);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HfModelConfig> ParseHfConfig(std::string_view config_json) {
  auto doc = ParseJsonStrict(config_json, "config.json");
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return absl::InvalidArgumentError("config.json is not a JSON object");
  const Config c(*doc);
  auto type = c.StringOr("model_type", "");
  if (!type.ok()) return type.status();
  if (type->empty()) return Bad("model_type", "is missing");
  if (*type == "gemma3") {
    auto text = Gemma3TextConfigOf(*doc);
    if (!text.ok()) return text.status();
    auto m = ParseHfConfig(text->dump());
    if (m.ok()) m->gemma3_multimodal = true;
    return m;
  }
  HfModelConfig m;
  m.arch = FindHfArch(*type);
  if (m.arch == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("config.json model_type \"", *type,
                     "\" is not supported (supported: llama, mistral, qwen2, qwen3, phi3, "
                     "gemma3_text, gemma3 as its text model)"));
  }
  if (auto s = ReadSizes(c, m); !s.ok()) return s;
  if (auto s = RefuseUnsupported(c, *m.arch); !s.ok()) return s;
  if (auto s = AddCommonMetadata(c, m); !s.ok()) return s;
  if (auto s = AddRopeAndWindow(*doc, m); !s.ok()) return s;
  return m;
}

}  // namespace tessera
