#include "engine/model/config.h"

#include <cmath>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/gguf.h"
#include "engine/model/gemma3_rules.h"
#include "engine/model/rope_tensors.h"

namespace tessera {
namespace {

// Largest value accepted for any dimension; guards int32 index arithmetic.
constexpr uint64_t kMaxDim = 1u << 20;

struct ArchInfo {
  const char* name;
  Architecture arch;
};
constexpr ArchInfo kArchitectures[] = {
    {"llama", Architecture::kLlama}, {"gpt2", Architecture::kGpt2},
    {"qwen2", Architecture::kQwen2}, {"qwen3", Architecture::kQwen3},
    {"phi3", Architecture::kPhi3},   {"gemma3", Architecture::kGemma3},
};

// Keys under "<arch>." this reader understands; any other is refused, so a
// file that asks for something not implemented never loads.
std::set<std::string> KnownKeys(Architecture a) {
  std::set<std::string> k = {"context_length", "embedding_length", "block_count",
                             "feed_forward_length", "vocab_size", "attention.head_count",
                             "attention.head_count_kv"};
  if (a == Architecture::kGpt2) {
    k.insert("attention.layer_norm_epsilon");
    return k;
  }
  for (const char* key : {"attention.layer_norm_rms_epsilon", "attention.key_length",
                          "attention.value_length", "rope.dimension_count", "rope.freq_base",
                          "rope.scaling.type", "rope.scaling.factor"}) {
    k.insert(key);
  }
  if (a == Architecture::kPhi3) {
    // The converter writes these for every Phi-3; llama.cpp ignores the
    // window (its Phi-3 SWA is disabled), and so does this engine.
    k.insert("attention.sliding_window");
    k.insert("rope.scaling.original_context_length");
    k.insert("rope.scaling.attn_factor");  // long-rope (Phi-3 128k, Phi-3.5)
  }
  if (a == Architecture::kGemma3) {
    k.insert("attention.sliding_window");
    k.insert("rope.freq_base_swa");
    k.insert("final_logit_softcapping");
  }
  return k;
}

absl::Status CheckKeys(const GgufFile& file, const std::string& arch, Architecture a) {
  const std::set<std::string> known = KnownKeys(a);
  const std::string prefix = arch + ".";
  for (const auto& [key, value] : file.metadata()) {
    if (!absl::StartsWith(key, prefix)) continue;
    if (known.count(key.substr(prefix.size())) == 0) {
      return absl::UnimplementedError(
          absl::StrCat("unsupported model metadata key ", key, " for architecture ", arch));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ReadDim(const GgufFile& file, const std::string& key) {
  auto v = file.GetUint(key);
  if (!v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model metadata ", key, ": ",
                                                   v.status().message()));
  }
  if (*v == 0 || *v > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat("model metadata ", key, " = ", *v,
                                                   " is out of range [1, ", kMaxDim, "]"));
  }
  return static_cast<int32_t>(*v);
}

absl::StatusOr<int32_t> ReadDimOr(const GgufFile& file, const std::string& key, int32_t fallback) {
  if (file.FindValue(key) == nullptr) return fallback;
  return ReadDim(file, key);
}

absl::Status ReadCommon(const GgufFile& file, const std::string& p, ModelConfig& c) {
  for (auto [field, key] : {std::pair{&c.dim, ".embedding_length"},
                            {&c.num_layers, ".block_count"},
                            {&c.num_heads, ".attention.head_count"},
                            {&c.ffn_dim, ".feed_forward_length"},
                            {&c.context_length, ".context_length"}}) {
    auto v = ReadDim(file, p + key);
    if (!v.ok()) return v.status();
    *field = *v;
  }
  auto kv = file.GetUintOr(p + ".attention.head_count_kv", c.num_heads);
  if (!kv.ok()) return kv.status();
  if (*kv == 0 || *kv > static_cast<uint64_t>(c.num_heads) || c.num_heads % *kv != 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_count_kv ", *kv,
                                                   " must divide head_count ", c.num_heads));
  }
  c.num_kv_heads = static_cast<int32_t>(*kv);
  // head_dim is attention.key_length when present (Gemma: 256 with
  // dim / heads = 288), else dim / heads as llama.cpp defaults it.
  const bool has_key_length = file.FindValue(p + ".attention.key_length") != nullptr;
  if (!has_key_length && c.dim % c.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("embedding_length ", c.dim,
                                                   " is not a multiple of head_count ",
                                                   c.num_heads));
  }
  auto head_dim = ReadDimOr(file, p + ".attention.key_length", c.dim / c.num_heads);
  if (!head_dim.ok()) return head_dim.status();
  auto value_dim = ReadDimOr(file, p + ".attention.value_length", *head_dim);
  if (!value_dim.ok()) return value_dim.status();
  if (*value_dim != *head_dim) {
    return absl::UnimplementedError(absl::StrCat("attention.value_length ", *value_dim,
                                                 " differs from attention.key_length ",
                                                 *head_dim, " (unsupported)"));
  }
  c.head_dim = *head_dim;
  c.q_dim = c.head_dim * c.num_heads;
  c.kv_dim = c.head_dim * c.num_kv_heads;
  if (int64_t{c.q_dim} > int64_t{kMaxDim}) return absl::InvalidArgumentError("head dims too large");
  return absl::OkStatus();
}

// rope.scaling: none, or linear (a frequency scale); anything else (yarn,
// longrope, ...) is refused by name.
absl::Status ReadRopeScaling(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto type = file.GetStringOr(p + ".rope.scaling.type", "none");
  if (!type.ok()) return type.status();
  auto factor = file.GetFloatOr(p + ".rope.scaling.factor", 0.0);
  if (!factor.ok()) return factor.status();
  if (*type == "none") {
    if (*factor != 0.0 && *factor != 1.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rope.scaling.factor ", *factor, " without a rope.scaling.type"));
    }
    return absl::OkStatus();
  }
  if (*type != "linear") {
    return absl::UnimplementedError(absl::StrCat("unsupported rope.scaling.type '", *type,
                                                 "' (supported: none, linear)"));
  }
  if (!(*factor > 0.0) || !std::isfinite(*factor)) {
    return absl::InvalidArgumentError("linear rope scaling needs a positive rope.scaling.factor");
  }
  c.rope_freq_scale = static_cast<float>(1.0 / *factor);
  return absl::OkStatus();
}

absl::Status ReadRope(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto base = file.GetFloatOr(p + ".rope.freq_base", 10000.0);
  if (!base.ok()) return base.status();
  c.rope_base = static_cast<float>(*base);
  auto rope_dim = file.GetUintOr(p + ".rope.dimension_count", c.head_dim);
  if (!rope_dim.ok()) return rope_dim.status();
  if (*rope_dim == 0 || *rope_dim > static_cast<uint64_t>(c.head_dim) || *rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("rope.dimension_count ", *rope_dim,
                                                   " must be even and at most ", c.head_dim));
  }
  c.rope_dim = static_cast<int32_t>(*rope_dim);
  if (!(c.rope_base > 0.0f) || !std::isfinite(c.rope_base)) {
    return absl::InvalidArgumentError("rope.freq_base must be positive");
  }
  return ReadRopeScaling(file, p, c);
}

absl::Status ReadRmsEps(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto eps = file.GetFloat(p + ".attention.layer_norm_rms_epsilon");
  if (!eps.ok()) return eps.status();
  c.norm_eps = static_cast<float>(*eps);
  if (!(c.norm_eps > 0.0f)) return absl::InvalidArgumentError("rms epsilon must be positive");
  return absl::OkStatus();
}

// Phi-3 4k, or long-rope Phi-3 (128k, Phi-3.5): per-dim factors for short
// and long contexts (rope_factors_short/long.weight), the context they were
// trained at, and an attention factor that scales RoPE's cos and sin.
absl::Status ReadPhi3Extras(const GgufFile& file, ModelConfig& c) {
  const bool has_long = file.FindTensor(kRopeFactorsLongTensor) != nullptr;
  const bool has_short = file.FindTensor(kRopeFactorsShortTensor) != nullptr;
  auto orig = file.GetUintOr("phi3.rope.scaling.original_context_length", c.context_length);
  if (!orig.ok()) return orig.status();
  auto attn = file.GetFloatOr("phi3.rope.scaling.attn_factor", 1.0);
  if (!attn.ok()) return attn.status();
  if (!has_long && !has_short) {
    if (*orig != static_cast<uint64_t>(c.context_length) || *attn != 1.0) {
      return absl::UnimplementedError(absl::StrCat(
          "phi3 with original context ", *orig, " < context ", c.context_length,
          " or an attention factor needs rope_factors_long/short.weight"));
    }
    return absl::OkStatus();
  }
  if (has_long != has_short) {
    return absl::InvalidArgumentError(
        "phi3 long-rope needs both rope_factors_long.weight and rope_factors_short.weight");
  }
  if (*orig == 0 || *orig > static_cast<uint64_t>(c.context_length)) {
    return absl::InvalidArgumentError(
        "phi3.rope.scaling.original_context_length must be in [1, context_length]");
  }
  if (!(*attn > 0.0) || !std::isfinite(*attn)) {
    return absl::InvalidArgumentError("phi3.rope.scaling.attn_factor must be positive");
  }
  c.rope_freq_factors = true;
  c.rope_original_context = static_cast<int32_t>(*orig);
  c.rope_attn_factor = static_cast<float>(*attn);
  return LimitContext(c, 0);
}

absl::Status ReadGemma3Extras(const GgufFile& file, ModelConfig& c) {
  auto window = file.GetUint("gemma3.attention.sliding_window");
  if (!window.ok()) return window.status();
  if (*window == 0 || *window > kMaxDim) {
    return absl::InvalidArgumentError("gemma3.attention.sliding_window out of range");
  }
  c.sliding_window = static_cast<int32_t>(*window);
  // llama.cpp's gemma3: five sliding layers then one global (il % 6 < 5),
  // sliding layers with rope base 10000 and no frequency scale.
  c.layer_sliding.assign(c.num_layers, 0);
  for (int32_t l = 0; l < c.num_layers; ++l) c.layer_sliding[l] = (l % 6) < 5 ? 1 : 0;
  auto base_swa = file.GetFloatOr("gemma3.rope.freq_base_swa", 10000.0);
  if (!base_swa.ok()) return base_swa.status();
  if (!(*base_swa > 0.0)) return absl::InvalidArgumentError("rope.freq_base_swa must be positive");
  c.rope_base_sliding = static_cast<float>(*base_swa);
  auto cap = file.GetFloatOr("gemma3.final_logit_softcapping", 0.0);
  if (!cap.ok()) return cap.status();
  if (*cap < 0.0 || !std::isfinite(*cap)) {
    return absl::InvalidArgumentError("final_logit_softcapping must be >= 0");
  }
  c.final_logit_softcap = static_cast<float>(*cap);
  c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
  const uint32_t scalar = Gemma3QueryPreAttnScalar(
      static_cast<uint32_t>(c.num_layers), static_cast<uint32_t>(c.dim),
      static_cast<uint32_t>(c.num_heads), static_cast<uint32_t>(c.head_dim));
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  return absl::OkStatus();
}

// The architecture's optional pieces and the keys only it has.
absl::Status ReadArchitecture(const GgufFile& file, ModelConfig& c) {
  const std::string& p = c.arch_name;
  if (c.arch == Architecture::kGpt2) {
    auto eps = file.GetFloat("gpt2.attention.layer_norm_epsilon");
    if (!eps.ok()) return eps.status();
    c.norm_eps = static_cast<float>(*eps);
    if (!(c.norm_eps > 0.0f)) return absl::InvalidArgumentError("layer_norm_epsilon must be > 0");
    c.norm = NormKind::kLayer;
    c.ffn = FfnKind::kGelu;
    c.learned_positions = c.linear_biases = c.fused_qkv = true;
    c.use_rope = false;
    if (c.q_dim != c.dim) return absl::InvalidArgumentError("gpt2 head dims must span dim");
    return absl::OkStatus();
  }
  if (auto s = ReadRmsEps(file, p, c); !s.ok()) return s;
  if (auto s = ReadRope(file, p, c); !s.ok()) return s;
  switch (c.arch) {
    case Architecture::kLlama:
      c.rope_freq_factors = file.FindTensor(kRopeFreqsTensor) != nullptr;
      return absl::OkStatus();
    case Architecture::kQwen2:
      c.qkv_bias = true;
      c.rope_style = RopeStyle::kNeox;
      return absl::OkStatus();
    case Architecture::kQwen3:
      c.qk_norm = true;
      c.rope_style = RopeStyle::kNeox;
      return absl::OkStatus();
    case Architecture::kPhi3:
      c.rope_style = RopeStyle::kNeox;
      c.fused_gate_up = true;
      c.fused_qkv = file.FindTensor("blk.0.attn_qkv.weight") != nullptr;
      return ReadPhi3Extras(file, c);
    case Architecture::kGemma3:
      c.rope_style = RopeStyle::kNeox;
      c.qk_norm = c.post_norms = true;
      c.ffn = FfnKind::kGeGluTanh;
      return ReadGemma3Extras(file, c);
    default:
      return absl::InternalError("unreachable architecture");
  }
}

absl::Status ReadVocabSize(const GgufFile& file, ModelConfig& c) {
  auto tokens = file.FindValue("tokenizer.ggml.tokens");
  if (tokens == nullptr && file.FindValue(c.arch_name + ".vocab_size") != nullptr) {
    // A Hugging Face folder's view: its vocabulary is tokenizer.json, and
    // config.json's vocab_size is the only size the view carries.
    auto vocab = file.GetUint(c.arch_name + ".vocab_size");
    if (!vocab.ok()) return vocab.status();
    if (*vocab == 0 || *vocab > kMaxDim * 4) {
      return absl::InvalidArgumentError(absl::StrCat(c.arch_name, ".vocab_size ", *vocab,
                                                     " is out of range"));
    }
    c.vocab_size = static_cast<int32_t>(*vocab);
    return absl::OkStatus();
  }
  const auto* token_list =
      tokens ? std::get_if<std::vector<std::string>>(&tokens->value) : nullptr;
  if (token_list == nullptr || token_list->empty()) {
    return absl::InvalidArgumentError("model has no tokenizer.ggml.tokens array");
  }
  if (token_list->size() > kMaxDim * 4) return absl::InvalidArgumentError("too many tokens");
  auto vocab = file.GetUintOr(c.arch_name + ".vocab_size", token_list->size());
  if (!vocab.ok()) return vocab.status();
  if (*vocab != token_list->size()) {
    return absl::InvalidArgumentError(absl::StrCat(c.arch_name, ".vocab_size ", *vocab,
                                                   " does not match the ", token_list->size(),
                                                   " tokens of tokenizer.ggml.tokens"));
  }
  c.vocab_size = static_cast<int32_t>(*vocab);
  return absl::OkStatus();
}

}  // namespace

absl::Status LimitContext(ModelConfig& c, int32_t max_context) {
  if (max_context < 0) return absl::InvalidArgumentError("the context cap must not be negative");
  if (max_context > 0 && max_context < c.context_length) c.context_length = max_context;
  if (c.rope_original_context > 0) {
    const bool long_context = c.context_length > c.rope_original_context;
    c.rope_factors_tensor = long_context ? kRopeFactorsLongTensor : kRopeFactorsShortTensor;
    c.rope_factors_unused = long_context ? kRopeFactorsShortTensor : kRopeFactorsLongTensor;
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ReadModelConfig(const GgufFile& file) {
  ModelConfig c;
  auto arch = file.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  c.arch_name = *arch;
  bool found = false;
  std::vector<std::string> names;
  for (const ArchInfo& a : kArchitectures) {
    names.push_back(a.name);
    if (*arch == a.name) c.arch = a.arch, found = true;
  }
  if (!found) {
    return absl::UnimplementedError(absl::StrCat("unsupported architecture '", *arch,
                                                 "' (supported: ", absl::StrJoin(names, ", "),
                                                 ")"));
  }
  if (auto s = CheckKeys(file, c.arch_name, c.arch); !s.ok()) return s;
  auto name = file.GetStringOr("general.name", "");
  if (!name.ok()) return name.status();
  c.name = *name;
  if (auto s = ReadCommon(file, c.arch_name, c); !s.ok()) return s;
  if (auto s = ReadArchitecture(file, c); !s.ok()) return s;
  if (c.layer_sliding.empty()) c.layer_sliding.assign(c.num_layers, 0);
  if (auto s = ReadVocabSize(file, c); !s.ok()) return s;
  return c;
}

}  // namespace tessera
