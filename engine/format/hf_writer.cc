#include "engine/format/hf_writer.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/format/hf_config.h"
#include "engine/format/hf_tensors.h"
#include "engine/model/gemma3_rules.h"
#include "engine/model/rope_tensors.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// A float32 metadata value as its shortest decimal form, so config.json
// shows 1e-05 rather than 9.99999974737875e-06.
json FloatJson(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  return json::parse(std::string(buf, r.ptr), nullptr, false);
}

struct ArchNames {
  std::string_view gguf, model_type, class_name;
};
constexpr ArchNames kNames[] = {
    {"llama", "llama", "LlamaForCausalLM"},         {"qwen2", "qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "qwen3", "Qwen3ForCausalLM"},         {"phi3", "phi3", "Phi3ForCausalLM"},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM"},
};

std::string_view TorchDtype(GgmlType t) {
  return t == GgmlType::kBF16 ? "bfloat16" : t == GgmlType::kF16 ? "float16" : "float32";
}

absl::Status CopyUint(const GgufFile& f, const std::string& key, json& out, const char* hf,
                      bool required) {
  if (f.FindValue(key) == nullptr && !required) return absl::OkStatus();
  auto v = f.GetUint(key);
  if (!v.ok()) return v.status();
  out[hf] = *v;
  return absl::OkStatus();
}

absl::Status CopyFloat(const GgufFile& f, const std::string& key, json& out, const char* hf) {
  if (f.FindValue(key) == nullptr) return absl::OkStatus();
  auto v = f.GetFloat(key);
  if (!v.ok()) return v.status();
  out[hf] = FloatJson(*v);
  return absl::OkStatus();
}

// rope_freqs.weight as the config.json rope_scaling it was converted from:
// Llama 3.1's (factor 8) or Llama 3.2's (factor 32) parameters, when they
// give the same factors (to float rounding); anything else is refused.
absl::Status AddLlama3RopeScaling(const GgufFile& f, const std::string& p,
                                  const GgufTensorInfo& t, json& c) {
  if (p != "llama" || t.type != GgmlType::kF32 || t.dims.size() != 1 || t.dims[0] == 0) {
    return absl::UnimplementedError("rope_freqs.weight has no HF form here (llama, F32, 1-D)");
  }
  auto base = f.GetFloatOr(p + ".rope.freq_base", 10000.0);
  if (!base.ok()) return base.status();
  std::vector<float> have(t.dims[0]);
  std::memcpy(have.data(), t.data, have.size() * sizeof(float));
  for (const double factor : {8.0, 32.0}) {
    const json rs = {{"rope_type", "llama3"},
                     {"factor", factor},
                     {"low_freq_factor", 1.0},
                     {"high_freq_factor", 4.0},
                     {"original_max_position_embeddings", 8192}};
    auto want = HfLlama3RopeFactors(rs, *base, static_cast<uint32_t>(2 * have.size()));
    if (!want.ok()) return want.status();
    bool same = true;
    for (size_t i = 0; i < have.size() && same; ++i) {
      same = std::fabs(have[i] - (*want)[i]) <= 1e-5f * std::fabs((*want)[i]);
    }
    if (same) {
      c["rope_scaling"] = rs;
      return absl::OkStatus();
    }
  }
  return absl::UnimplementedError(
      "rope_freqs.weight holds factors other than Llama 3.1's or 3.2's; no HF form here");
}

// Phi-3's long-rope factors as config.json's rope_scaling "longrope"; the
// attention factor is implied by the contexts (and checked on reading back).
absl::Status AddLongRopeScaling(const GgufFile& f, json& c) {
  json rs = {{"type", "longrope"}};
  for (const auto& [tensor, key] : {std::pair{kRopeFactorsLongTensor, "long_factor"},
                                    std::pair{kRopeFactorsShortTensor, "short_factor"}}) {
    const GgufTensorInfo* t = f.FindTensor(tensor);
    if (t == nullptr || t->type != GgmlType::kF32 || t->dims.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(tensor, " is missing or not F32 1-D"));
    }
    std::vector<float> v(t->dims[0]);
    std::memcpy(v.data(), t->data, v.size() * sizeof(float));
    rs[key] = v;
  }
  c["rope_scaling"] = rs;
  return absl::OkStatus();
}

absl::Status AddRopeScaling(const GgufFile& f, const std::string& p, json& c) {
  if (const GgufTensorInfo* t = f.FindTensor(kRopeFreqsTensor); t != nullptr) {
    return AddLlama3RopeScaling(f, p, *t, c);
  }
  if (p == "phi3" && f.FindTensor(kRopeFactorsLongTensor) != nullptr) {
    return AddLongRopeScaling(f, c);
  }
  if (f.FindValue(p + ".rope.scaling.type") == nullptr) return absl::OkStatus();
  auto type = f.GetString(p + ".rope.scaling.type");
  if (!type.ok()) return type.status();
  if (*type == "none") return absl::OkStatus();
  json rs = {{"rope_type", *type}};
  if (auto s = CopyFloat(f, p + ".rope.scaling.factor", rs, "factor"); !s.ok()) return s;
  if (*type == "yarn") {
    auto s = CopyUint(f, p + ".rope.scaling.original_context_length", rs,
                      "original_max_position_embeddings", false);
    if (!s.ok()) return s;
  }
  c["rope_scaling"] = rs;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<json> HfConfigFromGguf(const GgufFile& f) {
  auto arch = f.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  const ArchNames* names = nullptr;
  for (const ArchNames& n : kNames) {
    if (n.gguf == *arch) names = &n;
  }
  if (names == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("architecture '", *arch, "' has no Hugging Face form here"));
  }
  const std::string p = *arch;
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2) {
    return absl::InvalidArgumentError("model has no 2-D token_embd.weight");
  }
  json c = {{"model_type", names->model_type},
            {"architectures", {names->class_name}},
            {"torch_dtype", TorchDtype(embd->type)},
            {"tie_word_embeddings", f.FindTensor("output.weight") == nullptr},
            {"vocab_size", embd->dims[1]}};
  c[p == "gemma3" ? "hidden_activation" : "hidden_act"] =
      p == "gemma3" ? "gelu_pytorch_tanh" : "silu";
  struct UintKey {
    const char* gguf;
    const char* hf;
    bool required;
  };
  for (const UintKey& k : {UintKey{".embedding_length", "hidden_size", true},
                           {".block_count", "num_hidden_layers", true},
                           {".attention.head_count", "num_attention_heads", true},
                           {".attention.head_count_kv", "num_key_value_heads", false},
                           {".feed_forward_length", "intermediate_size", true},
                           {".context_length", "max_position_embeddings", true},
                           {".attention.key_length", "head_dim", false},
                           {".attention.sliding_window", "sliding_window", false}}) {
    if (auto s = CopyUint(f, p + k.gguf, c, k.hf, k.required); !s.ok()) return s;
  }
  if (p == "phi3") {
    auto s = CopyUint(f, "phi3.rope.scaling.original_context_length", c,
                      "original_max_position_embeddings", false);
    if (!s.ok()) return s;
  }
  if (auto s = CopyFloat(f, p + ".rope.freq_base", c, "rope_theta"); !s.ok()) return s;
  if (auto s = CopyFloat(f, p + ".attention.layer_norm_rms_epsilon", c, "rms_norm_eps"); !s.ok()) {
    return s;
  }
  if (p == "gemma3" && c.contains("head_dim")) {
    c["query_pre_attn_scalar"] = Gemma3QueryPreAttnScalar(
        c["num_hidden_layers"].get<uint32_t>(), c["hidden_size"].get<uint32_t>(),
        c["num_attention_heads"].get<uint32_t>(), c["head_dim"].get<uint32_t>());
  }
  if (p == "gemma3") {
    auto s = CopyFloat(f, "gemma3.final_logit_softcapping", c, "final_logit_softcapping");
    if (!s.ok()) return s;
  }
  if (auto s = AddRopeScaling(f, p, c); !s.ok()) return s;
  return c;
}

// Defined in hf_writer_files.cc.
absl::Status WriteHfTensors(const GgufFile& file, const HfModelConfig& m, const std::string& dir,
                            uint64_t shard_size);
absl::Status WriteHfSideFiles(const GgufFile& file, const std::string& dir,
                              const HfWriteOptions& options);

absl::Status WriteHfFolder(const GgufFile& file, const std::string& dir,
                           const HfWriteOptions& options) {
  auto config = HfConfigFromGguf(file);
  if (!config.ok()) return config.status();
  auto parsed = ParseHfConfig(config->dump());
  if (!parsed.ok()) {
    return absl::Status(
        parsed.status().code(),
        absl::StrCat("the written config.json would not load: ", parsed.status().message()));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  if (!std::filesystem::is_empty(dir, ec)) {
    return absl::AlreadyExistsError(absl::StrCat(dir, " is not empty"));
  }
  std::ofstream out(dir + "/config.json");
  out << config->dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", dir, "/config.json"));
  if (auto s = WriteHfTensors(file, *parsed, dir, options.shard_size); !s.ok()) return s;
  return WriteHfSideFiles(file, dir, options);
}

}  // namespace tessera
