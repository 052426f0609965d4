// tessera-quantize: writes a GGUF file (f32/f16/bf16) or a Hugging Face
// folder as a quantized GGUF file, choosing each tensor's type as llama.cpp's
// llama-quantize does.
//
//   tessera-quantize IN OUT TYPE [--threads N]
//
// Exit codes: 0 success, 1 read/write failure, 2 bad arguments.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "engine/format/hf_model.h"
#include "engine/model/gguf.h"
#include "engine/quant/quant.h"
#include "engine/quant/quantize_plan.h"
#include "engine/tokenizer/gguf_export.h"
#include "tools/quantize/quantize_model.h"

namespace {

constexpr char kUsage[] =
    "Usage: tessera-quantize IN OUT TYPE [--threads N]\n\n"
    "Quantizes IN (a GGUF file with f32, f16 or bf16 tensors, or a Hugging Face model\n"
    "folder) into the GGUF file OUT. TYPE is one of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,\n"
    "Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K (llama.cpp's file types of those names);\n"
    "each tensor gets the type llama.cpp's llama-quantize would give it (1-D tensors\n"
    "and norms stay as they are, output.weight Q6_K, more bits for some attn_v and\n"
    "ffn_down layers in the _K_S and _K_M mixes, fallbacks for rows that are not whole\n"
    "blocks). A folder's tokenizer.json (byte-level BPE such as Llama 3 and Qwen,\n"
    "or SentencePiece-style BPE such as Gemma) is written as GGUF tokenizer keys;\n"
    "one they cannot reproduce leaves OUT without a tokenizer (a warning says why).\n\n"
    "  --threads N   worker threads (default: all cores)\n"
    "  --help        show this help\n";

[[noreturn]] void UsageError(const std::string& message) {
  std::fprintf(stderr, "tessera-quantize: %s\n(run with --help for usage)\n", message.c_str());
  std::exit(2);
}

struct Args {
  std::string in, out;
  tessera::quant::QuantMix mix = tessera::quant::QuantMix::kQ8_0;
  int threads = 0;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--threads") {
      if (i + 1 >= argc) UsageError("--threads needs a value");
      if (!absl::SimpleAtoi(argv[++i], &args.threads) || args.threads < 1 ||
          args.threads > 1024) {
        UsageError("--threads must be an integer in 1..1024");
      }
    } else if (a.rfind("--", 0) == 0) {
      UsageError("unknown flag " + a);
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 3) UsageError("expected IN OUT TYPE");
  args.in = positional[0];
  args.out = positional[1];
  const auto mix = tessera::quant::QuantMixFromName(positional[2]);
  if (!mix) {
    UsageError("TYPE must be one of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M, Q5_K_S, "
               "Q5_K_M, Q6_K");
  }
  args.mix = *mix;
  if (args.threads == 0) args.threads = std::max(1u, std::thread::hardware_concurrency());
  return args;
}

// A bar redrawn in place on a terminal; one line per tensor otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(fileno(stderr)) != 0) {}
  void OnTensor(const tessera::quantize::TensorEvent& e) {
    name_ = e.tensor->name;
    const std::string_view from = tessera::quant::GgmlTypeNameOf(static_cast<uint32_t>(e.tensor->type));
    const std::string_view to = tessera::quant::GgmlTypeNameOf(e.out_type);
    if (!tty_) {
      std::fprintf(stderr, "[%4zu/%4zu] %-40s %5s -> %-5s%s\n", e.index + 1, e.count,
                   name_.c_str(), std::string(from).c_str(), std::string(to).c_str(),
                   e.fallback ? " (fallback: rows not whole blocks)" : "");
    }
  }
  void OnProgress(uint64_t done, uint64_t total) {
    if (!tty_ || total == 0) return;
    const int permille = static_cast<int>(done * 1000 / total);
    if (permille == last_permille_) return;
    last_permille_ = permille;
    constexpr int kWidth = 40;
    const int filled = permille * kWidth / 1000;
    std::fprintf(stderr, "\r[%s%s] %5.1f%% %-40.40s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), permille / 10.0, name_.c_str());
    std::fflush(stderr);
  }
  void Finish() {
    if (tty_) std::fputc('\n', stderr);
  }

 private:
  const bool tty_;
  std::string name_;
  int last_permille_ = -1;
};

// A Hugging Face folder's weights, and its tokenizer.json as GGUF tokenizer
// keys where it converts (HfTokenizerToGguf); otherwise the output has no
// tokenizer keys, and a warning says why.
absl::StatusOr<std::unique_ptr<tessera::GgufFile>> OpenFolder(
    const std::string& dir, std::optional<tessera::GgufTokenizerKeys>& tokenizer) {
  absl::StatusOr<tessera::ModelSource> source = tessera::OpenModelSource(dir);
  if (!source.ok()) {
    auto weights = tessera::OpenHfWeights(dir);
    if (weights.ok()) {
      std::fprintf(stderr, "tessera-quantize: warning: the output has no tokenizer: %s\n",
                   std::string(source.status().message()).c_str());
    }
    return weights;
  }
  auto keys = tessera::HfTokenizerToGguf(source->tokenizer_json, source->tokenizer_config_json,
                                         source->eos_token_ids);
  if (!keys.ok()) {
    std::fprintf(stderr, "tessera-quantize: warning: the output has no tokenizer: %s\n",
                 std::string(keys.status().message()).c_str());
  } else {
    if (!keys->dropped_normalizer.empty()) {
      std::fprintf(stderr,
                   "tessera-quantize: warning: GGUF has no key for tokenizer.json's %s "
                   "normalizer: text it would change may tokenize differently (as in "
                   "llama.cpp)\n",
                   keys->dropped_normalizer.c_str());
    }
    if (!keys->inexact.empty()) {
      std::fprintf(stderr, "tessera-quantize: warning: %s\n", keys->inexact.c_str());
    }
    tokenizer = *std::move(keys);
  }
  return std::move(source->file);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  std::optional<tessera::GgufTokenizerKeys> tokenizer;
  absl::StatusOr<std::unique_ptr<tessera::GgufFile>> in =
      std::filesystem::is_directory(args.in, ec) ? OpenFolder(args.in, tokenizer)
                                                  : tessera::GgufFile::Open(args.in);
  if (!in.ok()) {
    std::fprintf(stderr, "tessera-quantize: %s: %s\n", args.in.c_str(),
                 std::string(in.status().message()).c_str());
    return 1;
  }
  ProgressPrinter printer;
  tessera::quantize::QuantizeOptions options;
  options.mix = args.mix;
  options.threads = args.threads;
  options.on_tensor = [&](const tessera::quantize::TensorEvent& e) { printer.OnTensor(e); };
  options.on_progress = [&](uint64_t done, uint64_t total) { printer.OnProgress(done, total); };
  if (tokenizer) {
    options.add_metadata = [&](tessera::GgufWriter& writer) { tokenizer->WriteTo(writer); };
  }
  const absl::Status status = tessera::quantize::QuantizeModel(**in, args.out, options);
  printer.Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "tessera-quantize: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto out_bytes = std::filesystem::file_size(args.out, ec);
  std::fprintf(stderr, "tessera-quantize: wrote %s (%s, %.2f MiB) in %.2f s\n", args.out.c_str(),
               std::string(tessera::quant::QuantMixName(args.mix)).c_str(),
               ec ? 0.0 : static_cast<double>(out_bytes) / (1024.0 * 1024.0), seconds);
  return 0;
}
