// Tokenizing a 1 MiB English prompt on one core:
//   BM_TokenizeLlama3Json   the Llama 3 tokenizer.json (tests/data/tokenizers/llama3)
//   BM_TokenizeLlamaBpeGguf the GGUF llama-bpe vocabulary (tests/data/vocab)
//   BM_TokenizeJson/<i>     the other tokenizer.json files there (label: name)
//   BM_TokenizeGguf/<i>     SentencePiece GGUF vocabularies there (label: name)
// All read their data from the source tree and report an error without it
// (the GGUF vocabularies stored gzipped are unpacked under the build tree).
#include <iterator>
#include <memory>
#include <random>
#include <string>

#include "benchmark/benchmark.h"
#include "engine/model/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/testing/gzip_file.h"

namespace tessera::bench {
namespace {

using testing::ReadGzip;
using testing::ReadPlainOrGzip;
using testing::UnpackedPath;

std::string SourcePath(const std::string& rel) { return std::string(TESSERA_SOURCE_DIR) + "/" + rel; }

// 1 MiB of English-like prose: common words, punctuation, numbers and
// paragraph breaks from a fixed seed.
const std::string& EnglishPrompt() {
  static const std::string* const text = [] {
    static const char* const kWords[] = {
        "the", "of", "and", "to", "in", "is", "was", "that", "for", "it", "with", "as", "on",
        "be", "at", "by", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they",
        "which", "one", "you", "were", "her", "all", "she", "there", "would", "their", "we",
        "him", "been", "has", "when", "who", "will", "more", "no", "if", "out", "so", "said",
        "what", "up", "its", "about", "into", "than", "them", "can", "only", "other", "new",
        "some", "could", "time", "these", "two", "may", "then", "do", "first", "any", "my",
        "now", "such", "like", "our", "over", "man", "me", "even", "most", "made", "after",
        "also", "did", "many", "before", "must", "through", "back", "years", "where", "much",
        "your", "way", "well", "down", "should", "because", "each", "just", "those", "people",
        "Mr.", "how", "too", "little", "state", "good", "very", "make", "world", "still", "own",
        "see", "men", "work", "long", "get", "here", "between", "both", "life", "being", "under",
        "never", "day", "same", "another", "know", "while", "last", "might", "us", "great", "old",
        "year", "off", "come", "since", "against", "go", "came", "right", "used", "take", "three",
        "tokenization", "language", "model", "server", "inference", "don't", "it's", "we'll"};
    std::mt19937 rng(12345);
    auto* s = new std::string();
    bool start = true;
    while (s->size() < (1u << 20)) {
      std::string w = kWords[rng() % std::size(kWords)];
      if (start && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 32);
      *s += w;
      start = false;
      const uint32_t r = rng() % 100;
      if (r < 6) {
        *s += ". ";
        start = true;
      } else if (r < 9) {
        *s += ", ";
      } else if (r < 10) {
        *s += " " + std::to_string(rng() % 5000) + " ";
      } else if (r < 11) {
        *s += ".\n\n";
        start = true;
      } else {
        *s += " ";
      }
    }
    s->resize(1u << 20);
    return s;
  }();
  return *text;
}

void Run(benchmark::State& state, const Tokenizer& tok) {
  const std::string& text = EnglishPrompt();
  size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.Encode(text, EncodeOptions{false, true});
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

// The tokenizer.json of tests/data/tokenizers/NAME.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadJson(const std::string& name) {
  const std::string dir = SourcePath("tests/data/tokenizers/" + name);
  return Tokenizer::FromHuggingFace(ReadGzip(dir + "/tokenizer.json.gz"),
                                    ReadPlainOrGzip(dir + "/tokenizer_config.json"));
}

// Loaded once: Google Benchmark calls a benchmark function several times.
const absl::StatusOr<std::unique_ptr<Tokenizer>>& Llama3Json() {
  static const auto* const tok = new absl::StatusOr<std::unique_ptr<Tokenizer>>(LoadJson("llama3"));
  return *tok;
}

// BM_TokenizeJson/<i>: the other committed tokenizer.json files.
constexpr const char* kJsonNames[] = {"qwen3", "gemma3", "llama2", "mistral_nemo", "deepseek_v3"};

const absl::StatusOr<std::unique_ptr<Tokenizer>>& LlamaBpeGguf() {
  static const auto* const tok = [] {
    auto file =
        GgufFile::Open(UnpackedPath(SourcePath("tests/data/vocab/ggml-vocab-llama-bpe.gguf")));
    if (!file.ok()) return new absl::StatusOr<std::unique_ptr<Tokenizer>>(file.status());
    return new absl::StatusOr<std::unique_ptr<Tokenizer>>(Tokenizer::FromGguf(**file));
  }();
  return *tok;
}

void BM_TokenizeLlama3Json(benchmark::State& state) {
  const auto& tok = Llama3Json();
  if (!tok.ok()) {
    state.SkipWithError(std::string(tok.status().message()).c_str());
    return;
  }
  Run(state, **tok);
}
BENCHMARK(BM_TokenizeLlama3Json)->Unit(benchmark::kMillisecond);

void BM_TokenizeJson(benchmark::State& state) {
  const std::string name = kJsonNames[state.range(0)];
  state.SetLabel(name);
  const auto tok = LoadJson(name);
  if (!tok.ok()) {
    state.SkipWithError(std::string(tok.status().message()).c_str());
    return;
  }
  Run(state, **tok);
}
BENCHMARK(BM_TokenizeJson)->DenseRange(0, std::size(kJsonNames) - 1)->Unit(benchmark::kMillisecond);

void BM_TokenizeLlamaBpeGguf(benchmark::State& state) {
  const auto& tok = LlamaBpeGguf();
  if (!tok.ok()) {
    state.SkipWithError(std::string(tok.status().message()).c_str());
    return;
  }
  Run(state, **tok);
}
BENCHMARK(BM_TokenizeLlamaBpeGguf)->Unit(benchmark::kMillisecond);

// BM_TokenizeGguf/<i>: the other GGUF vocabularies of tests/data/vocab
// (SentencePiece ones: Llama 2, Gemma 3, Phi-3).
constexpr const char* kGgufNames[] = {"llama-spm", "gemma-3", "phi-3"};

void BM_TokenizeGguf(benchmark::State& state) {
  const std::string name = kGgufNames[state.range(0)];
  state.SetLabel(name);
  const std::string path = SourcePath("tests/data/vocab/ggml-vocab-" + name + ".gguf");
  auto file = GgufFile::Open(UnpackedPath(path));
  if (!file.ok()) {
    state.SkipWithError(std::string(file.status().message()).c_str());
    return;
  }
  const auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    state.SkipWithError(std::string(tok.status().message()).c_str());
    return;
  }
  Run(state, **tok);
}
BENCHMARK(BM_TokenizeGguf)->DenseRange(0, std::size(kGgufNames) - 1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::bench
