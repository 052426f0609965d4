// tessera-make-model: writes a GGUF v3 llama, gpt2, qwen2, qwen3, phi3 or
// gemma3 model with random
// weights (and a synthetic or copied vocab) for tests and benchmarks.
//
// Exit codes: 0 success, 1 I/O or self-check failure, 2 bad flags.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/format/hf_writer.h"
#include "engine/model/gguf.h"
#include "engine/model/model_writer.h"

namespace {

struct FlagDef {
  const char* name;
  const char* arg;  // nullptr for boolean switches
  const char* help;
};

constexpr FlagDef kFlags[] = {
    {"arch", "NAME", "llama|gpt2|qwen2|qwen3|phi3|gemma3 (default llama)"},
    {"dim", "N", "embedding length (required)"},
    {"layers", "N", "number of transformer blocks (required)"},
    {"heads", "N", "attention heads; must divide --dim (required)"},
    {"kv-heads", "N", "key/value heads, not gpt2; must divide --heads (default --heads)"},
    {"head-dim", "N", "attention.key_length, not gpt2 (default --dim / --heads)"},
    {"ffn", "N", "feed-forward hidden size (required)"},
    {"context", "N", "context length (default 2048)"},
    {"vocab-size", "N", "vocabulary size (required unless --vocab-from)"},
    {"dtype", "f32|f16|bf16", "type of 2-D weights; norms and biases stay f32 (default f32)"},
    {"seed", "N", "random seed (default 0)"},
    {"vocab-from", "PATH", "copy every tokenizer.ggml.* key from this GGUF file"},
    {"tied", nullptr, "no output.weight; the output head shares token_embd.weight"},
    {"rope-base", "F", "<arch>.rope.freq_base, not gpt2 (default: not written)"},
    {"rope-scaling", "llama3|longrope",
     "llama3 (llama only): a rope_freqs.weight of Llama 3.1 factors; longrope (phi3 only): "
     "Phi-3.5's long and short factors and attention factor"},
    {"original-context", "N", "longrope: the training context, below --context"},
    {"sliding-window", "N", "gemma3 attention.sliding_window (default 512)"},
    {"logit-softcap", "F", "gemma3 final_logit_softcapping (default: not written)"},
    {"output-std", "F", "stddev of the output head's weights (default 0.02)"},
    {"weight-std", "F", "stddev of the other matrices, not gpt2 (default 0.02)"},
    {"name", "TEXT", "general.name (default tessera-random-<arch>)"},
    {"format", "gguf|hf", "gguf file, or a Hugging Face folder (config.json + safetensors)"},
    {"shard-size", "BYTES", "hf: split the weights into shards of at most BYTES with an index"},
    {"tokenizer-json", "PATH", "hf: tokenizer.json to copy into the folder"},
    {"tokenizer-config", "PATH", "hf: tokenizer_config.json to copy into the folder"},
    {"out", "PATH", "output file, or folder with --format hf (required)"},
    {"help", nullptr, "show this help"},
};

void PrintUsage(FILE* f) {
  std::fprintf(f,
               "Usage: tessera-make-model --dim N --layers N --heads N --ffn N\n"
               "                          (--vocab-size N | --vocab-from PATH) --out PATH "
               "[flags]\n\n"
               "Writes a GGUF v3 model with random weights, llama.cpp tensor names and keys.\n\n"
               "Flags:\n");
  for (const FlagDef& d : kFlags) {
    const std::string left =
        d.arg ? absl::StrCat("--", d.name, " ", d.arg) : absl::StrCat("--", d.name);
    std::fprintf(f, "  %-26s %s\n", left.c_str(), d.help);
  }
}

[[noreturn]] void UsageError(const std::string& message) {
  std::fprintf(stderr, "tessera-make-model: %s\n(run with --help for usage)\n", message.c_str());
  std::exit(2);
}

const FlagDef* FindFlag(absl::string_view name) {
  for (const FlagDef& d : kFlags) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

// Accepts --name value, --name=value and bare --switch.
std::map<std::string, std::string> ParseArgs(int argc, char** argv) {
  std::map<std::string, std::string> values;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg.size() < 3 || arg.substr(0, 2) != "--")
      UsageError(absl::StrCat("unexpected argument '", arg, "'"));
    arg.remove_prefix(2);
    std::optional<std::string> value;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
      arg = arg.substr(0, eq);
    }
    const FlagDef* def = FindFlag(arg);
    if (def == nullptr) UsageError(absl::StrCat("unknown flag --", arg));
    if (def->arg == nullptr) {
      if (value && *value != "true" && *value != "false") {
        UsageError(absl::StrCat("--", arg, " takes no value (or =true / =false)"));
      }
      values[def->name] = value.value_or("true");
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) UsageError(absl::StrCat("--", arg, " needs a value (", def->arg, ")"));
      value = argv[++i];
    }
    if (values.count(def->name) != 0) UsageError(absl::StrCat("--", arg, " given twice"));
    values[def->name] = *value;
  }
  return values;
}

template <typename T>
T ParseNumber(const std::map<std::string, std::string>& v, const char* name, T fallback) {
  auto it = v.find(name);
  if (it == v.end()) return fallback;
  T out{};
  if (!absl::SimpleAtoi(it->second, &out)) {
    UsageError(
        absl::StrCat("--", name, ": expected a non-negative integer, got '", it->second, "'"));
  }
  return out;
}

float ParseFloat(const std::map<std::string, std::string>& v, const char* name) {
  float out = 0;
  if (!absl::SimpleAtof(v.at(name), &out)) {
    UsageError(absl::StrCat("--", name, ": expected a number, got '", v.at(name), "'"));
  }
  return out;
}

uint32_t Required(const std::map<std::string, std::string>& v, const char* name) {
  if (v.count(name) == 0) UsageError(absl::StrCat("--", name, " is required"));
  const uint32_t n = ParseNumber<uint32_t>(v, name, 0);
  if (n == 0) UsageError(absl::StrCat("--", name, " must be positive"));
  return n;
}

tessera::GgmlType ParseDtype(const std::string& s) {
  if (s == "f32") return tessera::GgmlType::kF32;
  if (s == "f16") return tessera::GgmlType::kF16;
  if (s == "bf16") return tessera::GgmlType::kBF16;
  UsageError(absl::StrCat("--dtype must be f32, f16 or bf16 (got '", s, "')"));
}

tessera::RandomModelSpec SpecFromFlags(const std::map<std::string, std::string>& v) {
  tessera::RandomModelSpec spec;
  auto get = [&](const char* name, std::string fallback) {
    auto it = v.find(name);
    return it == v.end() ? fallback : it->second;
  };
  spec.arch = get("arch", "llama");
  spec.name = get("name", "");
  spec.dim = Required(v, "dim");
  spec.layers = Required(v, "layers");
  spec.heads = Required(v, "heads");
  spec.ffn = Required(v, "ffn");
  spec.kv_heads = v.count("kv-heads") ? Required(v, "kv-heads") : 0;
  spec.head_dim = v.count("head-dim") ? Required(v, "head-dim") : 0;
  spec.sliding_window = v.count("sliding-window") ? Required(v, "sliding-window") : 0;
  spec.rope_scaling = get("rope-scaling", "");
  spec.original_context = v.count("original-context") ? Required(v, "original-context") : 0;
  spec.context = v.count("context") ? Required(v, "context") : 2048;
  if (v.count("vocab-size")) spec.vocab_size = Required(v, "vocab-size");
  if (v.count("vocab-size") == 0 && v.count("vocab-from") == 0) {
    UsageError("--vocab-size is required unless --vocab-from is given");
  }
  spec.dtype = ParseDtype(get("dtype", "f32"));
  spec.seed = ParseNumber<uint64_t>(v, "seed", 0);
  spec.tied = get("tied", "false") == "true";
  if (v.count("rope-base")) spec.rope_base = ParseFloat(v, "rope-base");
  if (v.count("logit-softcap")) spec.logit_softcap = ParseFloat(v, "logit-softcap");
  if (v.count("output-std")) spec.output_std = ParseFloat(v, "output-std");
  if (v.count("weight-std")) spec.weight_std = ParseFloat(v, "weight-std");
  return spec;
}

// Re-reads the written file and prints the one-line summary.
int SelfCheck(const std::string& path, const tessera::RandomModelSpec& spec, uint64_t params) {
  absl::StatusOr<std::unique_ptr<tessera::GgufFile>> file = tessera::GgufFile::Open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "tessera-make-model: self-check failed: %s\n",
                 file.status().ToString().c_str());
    return 1;
  }
  uint64_t read_params = 0;
  for (const tessera::GgufTensorInfo& t : (*file)->tensors()) read_params += t.num_elements;
  absl::StatusOr<std::string> arch = (*file)->GetString("general.architecture");
  if (read_params != params || !arch.ok() || *arch != spec.arch) {
    std::fprintf(stderr,
                 "tessera-make-model: self-check failed: %s does not read back as written\n",
                 path.c_str());
    return 1;
  }
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  std::printf("tessera-make-model: %s %s, %llu params (%.2fM), %llu bytes, %s\n", spec.arch.c_str(),
              std::string(tessera::GgmlTypeName(spec.dtype)).c_str(),
              static_cast<unsigned long long>(params), static_cast<double>(params) / 1e6,
              static_cast<unsigned long long>(ec ? 0 : size), path.c_str());
  return 0;
}

// Converts the written GGUF file into a Hugging Face folder at `out`.
int WriteHf(const std::string& gguf_path, const std::string& out,
            const std::map<std::string, std::string>& flags) {
  tessera::HfWriteOptions options;
  options.shard_size = ParseNumber<uint64_t>(flags, "shard-size", 0);
  if (flags.count("tokenizer-json")) options.tokenizer_json = flags.at("tokenizer-json");
  if (flags.count("tokenizer-config")) options.tokenizer_config = flags.at("tokenizer-config");
  auto file = tessera::GgufFile::Open(gguf_path);
  absl::Status s = file.ok() ? tessera::WriteHfFolder(**file, out, options) : file.status();
  if (!s.ok()) {
    std::fprintf(stderr, "tessera-make-model: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("tessera-make-model: Hugging Face folder %s\n", out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::string> flags = ParseArgs(argc, argv);
  if (flags.count("help")) {
    PrintUsage(stdout);
    return 0;
  }
  tessera::RandomModelSpec spec = SpecFromFlags(flags);
  if (flags.count("out") == 0 || flags.at("out").empty()) UsageError("--out is required");
  const std::string out = flags.at("out");
  std::unique_ptr<tessera::GgufFile> vocab;
  if (flags.count("vocab-from")) {
    absl::StatusOr<std::unique_ptr<tessera::GgufFile>> f =
        tessera::GgufFile::Open(flags.at("vocab-from"));
    if (!f.ok()) UsageError(absl::StrCat("--vocab-from: ", f.status().ToString()));
    vocab = std::move(*f);
    spec.vocab_from = vocab.get();
  }
  if (absl::Status s = tessera::ValidateRandomModelSpec(spec); !s.ok()) {
    UsageError(std::string(s.message()));
  }
  const std::string format = flags.count("format") ? flags.at("format") : "gguf";
  if (format != "gguf" && format != "hf") UsageError("--format must be gguf or hf");
  tessera::GgufWriter writer;
  absl::StatusOr<uint64_t> params = tessera::BuildRandomModel(spec, &writer);
  if (!params.ok()) UsageError(std::string(params.status().message()));
  const std::string gguf_path = format == "hf" ? out + ".tmp.gguf" : out;
  if (absl::Status s = writer.WriteFile(gguf_path); !s.ok()) {
    std::fprintf(stderr, "tessera-make-model: %s\n", s.ToString().c_str());
    return 1;
  }
  if (format == "gguf") return SelfCheck(out, spec, *params);
  const int rc = WriteHf(gguf_path, out, flags);
  std::filesystem::remove(gguf_path);
  return rc;
}
