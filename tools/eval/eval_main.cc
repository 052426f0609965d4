// tessera-eval: quality of a model on a text, comparable with llama.cpp's
// llama-perplexity.
//
//   tessera-eval ppl --model M --text FILE [--ctx 512] [--chunks N]
//   tessera-eval kld --base F16_MODEL --model QUANT_MODEL --text FILE [...]
//
// Exit codes: 0 success, 1 a file or model could not be used, 2 bad flags.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/backend.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tools/eval/evaluate.h"
#include "tools/eval/report.h"

namespace {

using tessera::eval::EvalModel;
using tessera::eval::EvalModelOptions;

constexpr const char* kUsage =
    "Usage:\n"
    "  tessera-eval ppl --model MODEL --text FILE [flags]\n"
    "  tessera-eval kld --base BASE_MODEL --model MODEL --text FILE [flags]\n\n"
    "ppl: perplexity of MODEL over FILE, chunked as llama-perplexity -f FILE -c CTX.\n"
    "kld: KL divergence KL(base || model) per token, top-1 agreement and both\n"
    "     perplexities, as llama-perplexity --kl-divergence reports them.\n"
    "A model is a GGUF file or a Hugging Face folder (config.json, safetensors,\n"
    "tokenizer.json), as tessera-server --model takes it.\n\n"
    "Flags:\n"
    "  --ctx N        tokens per chunk (default 512)\n"
    "  --chunks N     evaluate at most N chunks (default: all)\n"
    "  --batch N      tokens per forward step (default 512, at most --ctx)\n"
    "  --threads N    CPU threads (default: one per core)\n"
    "  --kv-cache-dtype f32|f16|int8\n"
    "                 MODEL's KV cache type (default f32); BASE_MODEL keeps f32, so\n"
    "                 kld --base M --model M measures what the cache type costs\n"
    "  --json         print one JSON object instead of text\n"
    "  --help         show this help\n";

int UsageError(const std::string& message) {
  std::fprintf(stderr, "tessera-eval: %s\n(run with --help for usage)\n", message.c_str());
  return 2;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "tessera-eval: %s\n", s.ToString().c_str());
  return 1;
}

struct Flags {
  std::map<std::string, std::string> values;
  std::string error;
};

// --name value and --name=value; --json and --help take no value.
Flags ParseFlags(int argc, char** argv, const std::map<std::string, bool>& known) {
  Flags f;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return {{}, "unexpected argument '" + arg + "'"};
    arg = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto it = known.find(arg);
    if (it == known.end()) return {{}, "unknown flag --" + arg};
    if (!it->second) {
      if (has_value) return {{}, "--" + arg + " takes no value"};
      value = "true";
    } else if (!has_value) {
      if (i + 1 >= argc) return {{}, "--" + arg + " needs a value"};
      value = argv[++i];
    }
    if (f.values.count(arg)) return {{}, "--" + arg + " given twice"};
    f.values[arg] = value;
  }
  return f;
}

bool PositiveFlag(const Flags& f, const char* name, int32_t fallback, int32_t* out,
                  std::string* error) {
  auto it = f.values.find(name);
  *out = fallback;
  if (it == f.values.end()) return true;
  if (!absl::SimpleAtoi(it->second, out) || *out <= 0) {
    *error = absl::StrCat("--", name, ": expected a positive integer, got '", it->second, "'");
    return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  std::string text = ss.str();
  if (!tessera::IsValidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not valid UTF-8"));
  }
  return text;
}

struct Common {
  EvalModelOptions options;
  int32_t chunks = 0;
  bool json = false;
  std::string text_path;
};

int Run(const std::string& mode, const Flags& f, const Common& c) {
  const auto t0 = std::chrono::steady_clock::now();
  auto text = ReadText(c.text_path);
  if (!text.ok()) return Fail(text.status());
  auto model = EvalModel::Open(f.values.at("model"), c.options);
  if (!model.ok()) return Fail(model.status());
  std::unique_ptr<EvalModel> base;
  if (mode == "kld") {
    tessera::eval::EvalModelOptions base_options = c.options;
    base_options.kv_dtype = tessera::DType::kF32;
    auto b = EvalModel::Open(f.values.at("base"), base_options);
    if (!b.ok()) return Fail(b.status());
    base = std::move(*b);
    if (auto s = tessera::eval::CheckSameVocab(base->tokenizer(), (*model)->tokenizer()); !s.ok())
      return Fail(s);
  }
  const EvalModel& tokenizing = base ? *base : **model;
  const std::vector<int32_t> tokens = tessera::eval::TokenizeText(tokenizing.tokenizer(), *text);
  auto plan = tessera::eval::PlanChunks(tokens.size(), c.options.ctx, c.chunks);
  if (!plan.ok()) return Fail(plan.status());
  const bool tty = ::isatty(2) != 0;
  auto progress = [&](int32_t chunk) {
    if (!tty) return;
    std::fprintf(stderr, "\rtessera-eval: chunk %d/%d", chunk + 1, plan->num_chunks);
    if (chunk + 1 == plan->num_chunks) std::fprintf(stderr, "\n");
  };
  tessera::eval::RunInfo info;
  info.model_path = f.values.at("model");
  info.num_tokens = tokens.size();
  info.plan = *plan;
  const int32_t batch = std::min(c.options.batch, c.options.ctx);
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::string out;
  if (mode == "ppl") {
    auto stats = tessera::eval::Perplexity(**model, tokens, *plan, batch, progress);
    if (!stats.ok()) return Fail(stats.status());
    info.seconds = seconds();
    out = c.json ? tessera::eval::PerplexityJson(*stats, info).dump(2) + "\n"
                 : tessera::eval::PerplexityText(*stats, info);
  } else {
    info.base_path = f.values.at("base");
    auto stats = tessera::eval::KlDivergence(*base, **model, tokens, *plan, batch, progress);
    if (!stats.ok()) return Fail(stats.status());
    info.seconds = seconds();
    out = c.json ? tessera::eval::KldJson(*stats, info).dump(2) + "\n"
                 : tessera::eval::KldText(*stats, info);
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Logs go to stderr: stdout carries the result (--json).
  spdlog::set_default_logger(spdlog::stderr_color_mt("tessera-eval"));
  if (argc < 2) return UsageError("a subcommand is required: ppl or kld");
  const std::string mode = argv[1];
  if (mode == "--help" || mode == "-h" || mode == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (mode != "ppl" && mode != "kld") return UsageError("unknown subcommand '" + mode + "'");
  std::map<std::string, bool> known = {{"model", true},  {"text", true},    {"ctx", true},
                                       {"chunks", true}, {"threads", true}, {"batch", true},
                                       {"json", false},  {"help", false},
                                       {"kv-cache-dtype", true}};
  if (mode == "kld") known["base"] = true;
  const Flags f = ParseFlags(argc, argv, known);
  if (!f.error.empty()) return UsageError(f.error);
  if (f.values.count("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  for (const char* required : {"model", "text"}) {
    if (!f.values.count(required)) return UsageError(absl::StrCat("--", required, " is required"));
  }
  if (mode == "kld" && !f.values.count("base")) return UsageError("--base is required");
  Common c;
  std::string error;
  if (!PositiveFlag(f, "ctx", 512, &c.options.ctx, &error) ||
      !PositiveFlag(f, "chunks", 0, &c.chunks, &error) ||
      !PositiveFlag(f, "batch", 512, &c.options.batch, &error) ||
      !PositiveFlag(f, "threads", 0, &c.options.threads, &error)) {
    return UsageError(error);
  }
  if (c.options.ctx < 4) return UsageError("--ctx must be at least 4");
  if (auto it = f.values.find("kv-cache-dtype"); it != f.values.end()) {
    const std::optional<tessera::DType> type = tessera::KvCacheDTypeFromName(it->second);
    if (!type) {
      return UsageError("--kv-cache-dtype: expected f32, f16 or int8, got '" + it->second + "'");
    }
    c.options.kv_dtype = *type;
  }
  c.json = f.values.count("json") != 0;
  c.text_path = f.values.at("text");
  return Run(mode, f, c);
}
