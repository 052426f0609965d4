// tessera-engine-bench: measures the engine in process, without gRPC.
//   tessera-engine-bench --model PATH [--threads N] [--prompt-len 128]
//                        [--gen-len 128] [--concurrency 1] [--repeats 3]
// Prints prefill and decode throughput (medians over repeats).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <atomic>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "spdlog/spdlog.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model;
  int threads = 0;
  int prompt_len = 128;
  int gen_len = 128;
  int concurrency = 1;
  int repeats = 3;
  std::string cpu_matmul = "auto";
};

// Records the time of the first token and of the finish.
class TimingSink : public tessera::GenerationSink {
 public:
  void OnTokens(tessera::TokenEvent event) override {
    if (!first_token) first_token = Clock::now();
    tokens += static_cast<int>(event.tokens.size());
  }
  void OnFinish(tessera::FinishEvent) override {
    finished = Clock::now();
    done.store(true);
    done.notify_all();
  }
  std::optional<Clock::time_point> first_token;
  Clock::time_point finished;
  int tokens = 0;
  std::atomic<bool> done{false};
};

bool ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--model" && (v = next())) o.model = v;
    else if (a == "--threads" && (v = next())) o.threads = std::atoi(v);
    else if (a == "--prompt-len" && (v = next())) o.prompt_len = std::atoi(v);
    else if (a == "--gen-len" && (v = next())) o.gen_len = std::atoi(v);
    else if (a == "--concurrency" && (v = next())) o.concurrency = std::atoi(v);
    else if (a == "--repeats" && (v = next())) o.repeats = std::atoi(v);
    else if (a == "--cpu-matmul" && (v = next())) o.cpu_matmul = v;
    else return false;
  }
  return !o.model.empty() && o.prompt_len > 0 && o.gen_len > 0 && o.concurrency > 0 &&
         o.repeats > 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One round: `concurrency` requests at once; returns {prefill tok/s, decode tok/s}.
std::pair<double, double> RunRound(tessera::Engine& engine, const Options& o, uint64_t& next_id) {
  std::vector<std::shared_ptr<TimingSink>> sinks;
  const auto start = Clock::now();
  for (int i = 0; i < o.concurrency; ++i) {
    tessera::GenerationRequest r;
    r.id = next_id++;
    for (int t = 0; t < o.prompt_len; ++t) r.prompt_ids.push_back(3 + (t * 7 + i) % 200);
    r.sampling.temperature = 0;
    r.stopping.max_tokens = o.gen_len;
    r.stopping.ignore_eos = true;
    sinks.push_back(std::make_shared<TimingSink>());
    if (auto s = engine.Submit(std::move(r), sinks.back()); !s.ok()) {
      std::fprintf(stderr, "submit failed: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  Clock::time_point last_first = start, end = start;
  int decoded = 0;
  for (auto& s : sinks) {
    s->done.wait(false);
    last_first = std::max(last_first, *s->first_token);
    end = std::max(end, s->finished);
    decoded += s->tokens - 1;
  }
  const double prefill_s = std::chrono::duration<double>(last_first - start).count();
  const double decode_s = std::chrono::duration<double>(end - last_first).count();
  return {o.concurrency * o.prompt_len / prefill_s, decoded / decode_s};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: tessera-engine-bench --model PATH [--threads N] [--prompt-len N] "
                 "[--gen-len N] [--concurrency N] [--repeats N] [--cpu-matmul auto|f32|bf16]\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  tessera::EngineOptions eo;
  eo.model_path = o.model;
  eo.device = "cpu";
  eo.num_threads = o.threads;
  eo.cpu_matmul = o.cpu_matmul;
  eo.max_num_seqs = std::max(64, o.concurrency);
  auto engine = tessera::Engine::Create(eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  uint64_t next_id = 1;
  Options warmup = o;
  warmup.prompt_len = 8;
  warmup.gen_len = 4;
  warmup.concurrency = 1;
  RunRound(**engine, warmup, next_id);
  std::vector<double> prefill, decode;
  for (int r = 0; r < o.repeats; ++r) {
    auto [p, d] = RunRound(**engine, o, next_id);
    prefill.push_back(p);
    decode.push_back(d);
  }
  std::printf("model=%s threads=%d prompt=%d gen=%d concurrency=%d repeats=%d cpu_matmul=%s\n",
              o.model.c_str(), o.threads, o.prompt_len, o.gen_len, o.concurrency, o.repeats,
              o.cpu_matmul.c_str());
  std::printf("prefill_tokens_per_second_median %.1f\n", Median(prefill));
  std::printf("decode_tokens_per_second_median %.1f\n", Median(decode));
  return 0;
}
