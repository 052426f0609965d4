#include "engine/model/config.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/model/gguf.h"

namespace tessera {
namespace {

// Largest value accepted for any dimension; guards int32 index arithmetic.
constexpr uint64_t kMaxDim = 1u << 20;

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

absl::Status ReadCommon(const GgufFile& file, const std::string& p, ModelConfig& c) {
  auto assign = [&](int32_t& out, const std::string& key) -> absl::Status {
    auto v = ReadDim(file, p + key);
    if (!v.ok()) return v.status();
    out = *v;
    return absl::OkStatus();
  };
  for (auto [field, key] : {std::pair{&c.dim, ".embedding_length"},
                            {&c.num_layers, ".block_count"},
                            {&c.num_heads, ".attention.head_count"},
                            {&c.ffn_dim, ".feed_forward_length"},
                            {&c.context_length, ".context_length"}}) {
    if (auto s = assign(*field, key); !s.ok()) return s;
  }
  auto kv = file.GetUintOr(p + ".attention.head_count_kv", c.num_heads);
  if (!kv.ok()) return kv.status();
  if (*kv == 0 || *kv > static_cast<uint64_t>(c.num_heads) || c.num_heads % *kv != 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_count_kv ", *kv,
                                                   " must divide head_count ", c.num_heads));
  }
  c.num_kv_heads = static_cast<int32_t>(*kv);
  if (c.dim % c.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("embedding_length ", c.dim,
                                                   " is not a multiple of head_count ",
                                                   c.num_heads));
  }
  c.head_dim = c.dim / c.num_heads;
  c.kv_dim = c.head_dim * c.num_kv_heads;
  return absl::OkStatus();
}

absl::Status ReadLlamaExtras(const GgufFile& file, ModelConfig& c) {
  auto eps = file.GetFloat("llama.attention.layer_norm_rms_epsilon");
  if (!eps.ok()) return eps.status();
  c.norm_eps = static_cast<float>(*eps);
  auto base = file.GetFloatOr("llama.rope.freq_base", 10000.0);
  if (!base.ok()) return base.status();
  c.rope_base = static_cast<float>(*base);
  auto rope_dim = file.GetUintOr("llama.rope.dimension_count", c.head_dim);
  if (!rope_dim.ok()) return rope_dim.status();
  if (*rope_dim == 0 || *rope_dim > static_cast<uint64_t>(c.head_dim) || *rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("rope.dimension_count ", *rope_dim,
                                                   " must be even and at most ", c.head_dim));
  }
  c.rope_dim = static_cast<int32_t>(*rope_dim);
  if (!(c.rope_base > 0.0f) || !(c.norm_eps > 0.0f)) {
    return absl::InvalidArgumentError("rope freq_base and rms epsilon must be positive");
  }
  return absl::OkStatus();
}

absl::Status ReadGpt2Extras(const GgufFile& file, ModelConfig& c) {
  auto eps = file.GetFloat("gpt2.attention.layer_norm_epsilon");
  if (!eps.ok()) return eps.status();
  c.norm_eps = static_cast<float>(*eps);
  if (!(c.norm_eps > 0.0f)) return absl::InvalidArgumentError("layer_norm_epsilon must be > 0");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ReadModelConfig(const GgufFile& file) {
  ModelConfig c;
  auto arch = file.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  c.arch_name = *arch;
  if (*arch == "llama") {
    c.arch = Architecture::kLlama;
  } else if (*arch == "gpt2") {
    c.arch = Architecture::kGpt2;
  } else {
    return absl::UnimplementedError(absl::StrCat("unsupported architecture '", *arch,
                                                 "' (supported: llama, gpt2)"));
  }
  auto name = file.GetStringOr("general.name", "");
  if (!name.ok()) return name.status();
  c.name = *name;
  if (auto s = ReadCommon(file, c.arch_name, c); !s.ok()) return s;
  auto s = c.arch == Architecture::kLlama ? ReadLlamaExtras(file, c) : ReadGpt2Extras(file, c);
  if (!s.ok()) return s;
  auto tokens = file.FindValue("tokenizer.ggml.tokens");
  const auto* token_list =
      tokens ? std::get_if<std::vector<std::string>>(&tokens->value) : nullptr;
  if (token_list == nullptr || token_list->empty()) {
    return absl::InvalidArgumentError("model has no tokenizer.ggml.tokens array");
  }
  c.vocab_size = static_cast<int32_t>(token_list->size());
  return c;
}

}  // namespace tessera
