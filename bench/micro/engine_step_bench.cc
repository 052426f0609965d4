// Whole engine steps of a 110M-shape llama model (dim 768, 12 layers, 12
// heads, ffn 2048, vocab 32000, f16, tied embeddings) through the public
// Engine API on the CPU:
//   BM_EngineStep/<batch>/<prompt>  decode steps of `batch` greedy requests
//                          with `prompt`-token prompts; the time is per
//                          step, from the last first token to the last
//                          finish, over kDecodeTokens - 1 steps. Counters
//                          give the bytes a step must read (weights plus
//                          the KV cache at the mean context) and the read
//                          rate that implies, to compare with BM_MemoryRead
//   BM_Prefill/<len>       time to first token of one `len`-token prompt
// The model is written to a temporary file, loaded once per process, and
// the file is unlinked once mapped. TESSERA_BENCH_MODEL=FILE runs another
// model of that shape instead (a quantized file of it, say; step_MB and
// read_GBps then count the file's size as its weights).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bench/micro/bench_common.h"
#include "engine/engine.h"
#include "engine/model/model_writer.h"
#include "spdlog/spdlog.h"

namespace tessera::bench {
namespace {

constexpr int32_t kPromptTokens = 8;
constexpr int32_t kDecodeTokens = 32;  // max_tokens of each decode request

// Sums the engine's own step timings, split into decode-only and prefill
// steps. OnStep runs on the engine thread.
class StepRecorder final : public EngineObserver {
 public:
  struct Totals {
    int64_t decode_steps = 0, decode_seqs = 0, prefill_steps = 0, preemptions = 0;
    double decode_seconds = 0, prefill_seconds = 0;
  };
  void OnStep(const StepStats& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.num_prefill_tokens == 0) {
      ++totals_.decode_steps;
      totals_.decode_seqs += s.num_seqs;
      totals_.decode_seconds += s.step_seconds;
    } else {
      ++totals_.prefill_steps;
      totals_.prefill_seconds += s.step_seconds;
    }
  }
  void OnPreemption() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++totals_.preemptions;
  }
  Totals Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(totals_, Totals{});
  }

 private:
  std::mutex mu_;
  Totals totals_;
};

// Records when a request's first token and its finish arrived.
class TimingSink final : public GenerationSink {
 public:
  void OnTokens(TokenEvent event) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!has_first_) first_token_ = Clock::now();
    has_first_ = true;
  }
  void OnFinish(FinishEvent event) override {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = Clock::now();
    reason_ = event.reason;
    done_ = true;
    cv_.notify_all();
  }
  // Blocks until OnFinish; false unless the request ran to max_tokens.
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return has_first_ && reason_ == FinishReason::kLength;
  }
  Clock::time_point first_token() const { return first_token_; }
  Clock::time_point finished() const { return finished_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool has_first_ = false, done_ = false;
  FinishReason reason_ = FinishReason::kError;
  Clock::time_point first_token_, finished_;
};

struct BenchEngine {
  StepRecorder recorder;  // outlives the engine, which calls it
  std::unique_ptr<Engine> engine;
  uint64_t next_id = 1;
  std::string error;  // set when the engine could not be created
  // Weight bytes a decode step reads (DecodeStepBytes): the f16 model's, or
  // the size of the TESSERA_BENCH_MODEL file.
  double weight_bytes = 0;
};

// The f16 model's weights (the tied table once, as the LM head; embedding
// rows and norms are negligible). A TESSERA_BENCH_MODEL file counts its
// size instead: for a tied file of this shape, its weights plus under 1 MB
// of vocabulary and metadata.
double F16WeightBytes() {
  constexpr double kDim = 768, kLayers = 12, kFfn = 2048, kVocab = 32000;
  return 2.0 * (kLayers * (4 * kDim * kDim + 3 * kDim * kFfn) + kVocab * kDim);
}

absl::Status WriteModel(const std::string& path) {
  RandomModelSpec spec;
  spec.arch = "llama";
  spec.name = "microbench-110m";
  spec.dim = 768;
  spec.layers = 12;
  spec.heads = 12;
  spec.kv_heads = 12;
  spec.ffn = 2048;
  spec.context = 1024;
  spec.vocab_size = 32000;
  spec.dtype = GgmlType::kF16;
  spec.seed = 1;
  spec.tied = true;
  GgufWriter writer;
  if (auto built = BuildRandomModel(spec, &writer); !built.ok()) return built.status();
  return writer.WriteFile(path);
}

std::unique_ptr<BenchEngine> CreateBenchEngine() {
  auto bench = std::make_unique<BenchEngine>();
  const char* given = std::getenv("TESSERA_BENCH_MODEL");
  const bool own = given == nullptr || *given == '\0';
  const std::string path =
      own ? (std::filesystem::temp_directory_path() /
             ("tessera-microbench-" + std::to_string(getpid()) + ".gguf"))
                .string()
          : std::string(given);
  absl::Status written = own ? WriteModel(path) : absl::OkStatus();
  std::error_code size_error;
  const uintmax_t file_bytes = std::filesystem::file_size(path, size_error);
  bench->weight_bytes = own || size_error ? F16WeightBytes() : static_cast<double>(file_bytes);
  if (written.ok()) {
    EngineOptions options;
    options.model_path = path;
    options.device = "cpu";
    options.num_threads = BenchThreads();
    options.kv_cache_bytes = int64_t{512} << 20;  // ~14,000 f16 tokens; runs use < 5,200
    auto engine = Engine::Create(options, &bench->recorder);
    if (engine.ok()) bench->engine = std::move(*engine);
    else bench->error = engine.status().ToString();
  } else {
    bench->error = written.ToString();
  }
  std::error_code ignored;
  if (own) std::filesystem::remove(path, ignored);  // the engine keeps its mapping
  return bench;
}

// Submits `batch` greedy requests (prompts of `prompt_len` tokens that
// differ per request) that each run exactly `max_tokens` tokens.
std::vector<std::shared_ptr<TimingSink>> Submit(BenchEngine& b, int32_t batch,
                                                int32_t prompt_len, int32_t max_tokens) {
  std::vector<std::shared_ptr<TimingSink>> sinks;
  for (int32_t i = 0; i < batch; ++i) {
    GenerationRequest r;
    r.id = b.next_id++;
    for (int32_t t = 0; t < prompt_len; ++t) r.prompt_ids.push_back(3 + (t * 7 + i * 131) % 31000);
    r.sampling.temperature = 0.0f;
    r.stopping.max_tokens = max_tokens;
    r.stopping.ignore_eos = true;
    sinks.push_back(std::make_shared<TimingSink>());
    if (!b.engine->Submit(std::move(r), sinks.back()).ok()) std::abort();
  }
  return sinks;
}

// Waits for every sink and for the engine to go idle (so the recorder has
// seen the last step); false when a request did not run to max_tokens.
bool WaitAll(BenchEngine& b, const std::vector<std::shared_ptr<TimingSink>>& sinks) {
  bool ok = true;
  for (const auto& s : sinks) ok = s->Wait() && ok;
  b.engine->WaitIdle(std::chrono::seconds(60));
  return ok;
}

BenchEngine& SharedEngine() {
  static const std::unique_ptr<BenchEngine> bench = [] {
    spdlog::set_level(spdlog::level::warn);
    auto b = CreateBenchEngine();
    if (b->engine) {
      WaitAll(*b, Submit(*b, 1, kPromptTokens, 4));  // warm-up
      b->recorder.Take();
    }
    return b;
  }();
  return *bench;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Bytes one decode step of `batch` sequences holding `context` tokens reads
// at least once: every weight (`weights`) and K and V of every cached token
// (f16) in every layer.
double DecodeStepBytes(double weights, int32_t batch, double context) {
  constexpr double kDim = 768, kLayers = 12;
  const double kv = 2.0 * 2 * kLayers * kDim * context * batch;
  return weights + kv;
}

void BM_EngineStep(benchmark::State& state) {
  BenchEngine& b = SharedEngine();
  if (!b.engine) return state.SkipWithError(b.error.c_str());
  const int32_t batch = static_cast<int32_t>(state.range(0));
  const int32_t prompt = static_cast<int32_t>(state.range(1));
  StepRecorder::Totals totals;
  for (auto _ : state) {
    const auto sinks = Submit(b, batch, prompt, kDecodeTokens);
    if (!WaitAll(b, sinks)) return state.SkipWithError("a request did not reach max_tokens");
    Clock::time_point start = Clock::time_point::min(), end = Clock::time_point::min();
    for (const auto& s : sinks) {
      start = std::max(start, s->first_token());
      end = std::max(end, s->finished());
    }
    // The last request to get its first token decodes kDecodeTokens - 1 more.
    state.SetIterationTime(Seconds(end - start) / (kDecodeTokens - 1));
    const StepRecorder::Totals t = b.recorder.Take();
    totals.decode_steps += t.decode_steps;
    totals.decode_seqs += t.decode_seqs;
    totals.decode_seconds += t.decode_seconds;
  }
  state.SetItemsProcessed(state.iterations() * batch);  // one token per sequence per step
  state.counters["tokens"] =
      benchmark::Counter(double(state.iterations()) * batch, benchmark::Counter::kIsRate);
  // The engine's own timing of its decode-only steps (schedule to postprocess),
  // and how many sequences those steps held on average.
  const double steps = std::max<int64_t>(1, totals.decode_steps);
  state.counters["engine_step_ms"] = 1e3 * totals.decode_seconds / steps;
  state.counters["mean_batch"] = double(totals.decode_seqs) / steps;
  const double bytes = DecodeStepBytes(b.weight_bytes, batch, prompt + kDecodeTokens / 2.0);
  state.counters["step_MB"] = bytes / 1e6;
  state.counters["read_GBps"] = bytes / (totals.decode_seconds / steps) / 1e9;
}

void BM_Prefill(benchmark::State& state) {
  BenchEngine& b = SharedEngine();
  if (!b.engine) return state.SkipWithError(b.error.c_str());
  const int32_t len = static_cast<int32_t>(state.range(0));
  double engine_seconds = 0;
  for (auto _ : state) {
    const Clock::time_point submitted = Clock::now();
    const auto sinks = Submit(b, 1, len, 1);
    if (!WaitAll(b, sinks)) return state.SkipWithError("the request did not finish");
    state.SetIterationTime(Seconds(sinks[0]->first_token() - submitted));
    engine_seconds += b.recorder.Take().prefill_seconds;
  }
  state.SetItemsProcessed(state.iterations() * len);  // prompt tokens
  state.counters["tokens"] =
      benchmark::Counter(double(state.iterations()) * len, benchmark::Counter::kIsRate);
  state.counters["engine_step_ms"] = 1e3 * engine_seconds / double(state.iterations());
}

BENCHMARK(BM_EngineStep)
    ->Args({1, kPromptTokens})
    ->Iterations(4)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// 16 sequences with short prompts, then 8, 16 and 32 with the serving
// benchmark's 128-token prompts, where the KV cache adds ~40% to the bytes
// of a step.
BENCHMARK(BM_EngineStep)
    ->Args({16, kPromptTokens})
    ->Args({8, 128})
    ->Args({16, 128})
    ->Args({32, 128})
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Prefill)->Arg(512)->Iterations(2)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::bench
