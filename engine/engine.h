// The engine: one thread owns all model and scheduling state. Other threads
// talk to it only through a command queue (Submit / Cancel) and read a few
// atomically published counters (Stats). It knows nothing of gRPC.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/request.h"

namespace tessera {

class Tokenizer;
struct EngineState;

struct EngineOptions {
  std::string model_path;
  // A chat template file that replaces the model's own; empty: the model's.
  std::string chat_template_path;
  std::string device = "auto";       // cpu | cuda | auto
  int32_t num_threads = 0;           // 0: one per core
  // CPU matrix products: "f32", "bf16" (AVX512-BF16 or AMX; see
  // BackendOptions), or "auto": bf16 when every matrix of the model is f16
  // or bf16 and the CPU's kernel level has a bf16 kernel, f32 otherwise.
  std::string cpu_matmul = "auto";
  int64_t kv_cache_bytes = 0;        // 0: a default that fits this machine (CUDA: see below)
  // CUDA: fraction of the device's free memory (after weights and
  // workspaces) that the KV pool takes when kv_cache_bytes is 0.
  float gpu_memory_utilization = 0.9f;
  // CUDA: weight dtype on the device: auto, f16, bf16 or f32.
  std::string dtype = "auto";
  int32_t block_size = 16;           // tokens per KV block
  // KV cache element type: "f32", "f16", or "auto" (f16 for f16/bf16 and
  // quantized weights, f32 where a matrix is f32).
  std::string kv_cache_dtype = "auto";
  int32_t max_num_seqs = 64;         // sequences in one step
  int32_t max_batched_tokens = 512;  // tokens in one step (prompts longer are chunked)
  // Longest prompt + output a request may ask for; 0: the model's context
  // length. Phi-3 long-rope models pick their RoPE factors by it.
  int32_t context_length = 0;
  // SchedulerOptions::prefill_group_tokens; -1: 128 on the CPU backend,
  // whose matrix products are no faster per token past about a hundred rows,
  // and 0 (no limit) on CUDA, where larger steps are.
  int32_t prefill_group_tokens = -1;
  int32_t max_queued_requests = 256; // waiting requests before RESOURCE_EXHAUSTED
  // Automatic prefix caching: full KV blocks stay cached after their request
  // and are shared by later prompts that start with the same tokens.
  bool enable_prefix_caching = true;
  // "fcfs" or "priority" (see SchedulingPolicy in engine/scheduler).
  std::string scheduling_policy = "fcfs";
  // Priority policy: seconds of waiting that make a request one priority
  // level more urgent; 0 disables aging.
  double priority_aging_seconds = 10.0;
  // Steps failing one after another (a device fault) before the engine
  // calls itself unhealthy: from then on it refuses requests with
  // UNAVAILABLE and EngineStats::healthy is false, so the server can report
  // NOT_SERVING and an orchestrator can replace it.
  int32_t max_consecutive_failed_steps = 3;
  // Tests only: the first N steps fail as a device error would.
  int32_t fail_first_steps_for_testing = 0;
  // Tests only: the first step with work sleeps this long before its forward
  // pass, as a step stuck in a kernel would.
  int32_t stall_first_step_for_testing_ms = 0;
  // Tests only: every step with work sleeps this long first (a slow model).
  int32_t step_delay_for_testing_ms = 0;
};

// Called on the engine thread after each step; the server turns these into
// metrics. Implementations must be quick and must not call back into Engine.
struct StepStats {
  int32_t num_seqs = 0;           // sequences in the step
  int32_t num_tokens = 0;         // tokens computed (prefill + decode)
  int32_t num_prefill_tokens = 0;
  int32_t num_prefill_slots = 0;  // B × T_q_max of the padded prefill attention layout
  int32_t num_padded_tokens = 0;  // of those, padding slots
  // Prefix cache lookups of requests admitted in the step, in tokens:
  // tokens looked up, and of those found cached (not computed).
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  double step_seconds = 0;
};

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnStep(const StepStats& stats) = 0;
  virtual void OnPreemption() = 0;
};

// A snapshot readable from any thread.
struct EngineStats {
  int32_t requests_running = 0;
  int32_t requests_waiting = 0;
  double kv_cache_usage_ratio = 0;  // used blocks / total blocks
  int32_t kv_cache_blocks = 0;         // blocks in the pool
  int32_t kv_cache_cached_blocks = 0;  // blocks in the prefix cache (in use or evictable)
  uint64_t preemptions = 0;
  bool healthy = true;  // false once max_consecutive_failed_steps steps failed in a row
  // How long the forward pass now running has run; 0 between steps. A
  // watchdog reads it to report a stuck step.
  double step_running_seconds = 0;
};

struct ModelInfo {
  std::string name;            // general.name, or the file name
  std::string architecture;    // "llama" | "gpt2"
  std::string tokenizer_model; // "llama" | "gpt2"
  std::string device;          // "cpu" | "cuda"
  std::string weight_dtype;    // "f32", "f16", "bf16", "q8_0"..., or a mix as "q4_K+q6_K"
  std::string format;          // "gguf" | "hf" (a Hugging Face folder)
  std::string kv_cache_dtype;  // "f32" | "f16" | "int8"
  std::string cpu_matmul;      // "f32" | "bf16" (CPU backend)
  std::string chat_template;   // Jinja source of the chat template; "" when none
  bool prefix_caching = false;
  std::string scheduling_policy;  // "fcfs" | "priority"
  // Token ids both the tokenizer and the model know: [0, vocab_size). A
  // published folder's config.json may pad the model past its tokenizer
  // (Qwen, Phi-3) or a tokenizer may hold an id past the model (Gemma 3's
  // <image_soft_token>); ids past either are never sampled and are refused
  // in prompts.
  int32_t vocab_size = 0;
  int32_t context_length = 0;
  int32_t embedding_dim = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int64_t num_parameters = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = false;
  // RoPE as the layer loop applies it (GetModelInfo's rope fields).
  std::string rope_scaling;  // "none" | "linear" | "llama3" | "longrope"; "" without RoPE
  float rope_freq_base = 0.0f;       // layers without a sliding window; 0 without RoPE
  float rope_scaling_factor = 1.0f;  // linear divisor, or the largest factor in use
  int32_t sliding_window = 0;        // 0: no layer has a window
  std::vector<int32_t> sliding_window_layers;
  float rope_freq_base_sliding = 0.0f;  // sliding layers' base (no scaling); 0: none
};

class Engine {
 public:
  // Loads the model and tokenizer and starts the engine thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options,
                                                        EngineObserver* observer = nullptr);
  ~Engine();  // stops the thread; unfinished requests finish as kCancelled

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Validates it against the model (ids in vocab, prompt +
  // max_tokens within the context): INVALID_ARGUMENT. A full queue:
  // RESOURCE_EXHAUSTED. After StopAccepting(): UNAVAILABLE. On OK, the sink
  // will get exactly one OnFinish.
  absl::Status Submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink);

  // Asks the engine to finish a request as kCancelled. Unknown ids are
  // ignored (the request may have finished already).
  void Cancel(uint64_t request_id);

  // New submissions get UNAVAILABLE from now on; in-flight ones continue.
  void StopAccepting();
  // Blocks until no request is queued or running, or the timeout passes.
  // Returns true when idle.
  bool WaitIdle(std::chrono::milliseconds timeout);
  // Stops the thread after finishing every request as kCancelled.
  void Shutdown();

  const Tokenizer& tokenizer() const;
  const ModelInfo& model_info() const { return info_; }
  EngineStats Stats() const;
  // Computes the logits for the last position of `prompt_ids`, outside the
  // scheduler (for tests and tools). Must not be called while requests run.
  absl::StatusOr<std::vector<float>> DebugPromptLogits(const std::vector<int32_t>& prompt_ids);

 private:
  // A message from another thread to the engine thread.
  struct Command {
    enum Kind { kAdd, kCancel, kRun };
    explicit Command(Kind k) : kind(k) {}
    Kind kind;
    uint64_t request_id = 0;
    GenerationRequest request;              // kAdd
    std::shared_ptr<GenerationSink> sink;   // kAdd
    std::function<void()> task;             // kRun: runs on the engine thread
  };

  explicit Engine(const EngineOptions& options, EngineObserver* observer);
  absl::Status Load();
  absl::Status AllocateKvCache();
  void FillModelInfo();
  uint64_t PrefixCacheKey() const;
  absl::Status ValidateRequest(const GenerationRequest& request) const;
  void Loop();
  // Moves queued commands into the scheduler; waits for one when `block`.
  // Returns false when the engine is stopping.
  bool DrainCommands(bool block);
  void RunStep();
  // Counts a step's outcome; after too many failures in a row the engine
  // becomes unhealthy for good.
  void RecordStepOutcome(const absl::Status& status);
  void PublishStats();

  EngineOptions options_;
  EngineObserver* observer_;
  ModelInfo info_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<EngineState> state_;  // engine-thread state: model, cache, scheduler

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Command> commands_;
  int32_t queued_submissions_ = 0;  // guarded by mu_
  bool accepting_ = true;           // guarded by mu_
  bool stop_ = false;               // guarded by mu_
  bool idle_ = true;                // guarded by mu_

  std::atomic<int32_t> stat_running_{0};
  std::atomic<int32_t> stat_waiting_{0};
  std::atomic<double> stat_kv_usage_{0};
  std::atomic<int32_t> stat_kv_blocks_{0};
  std::atomic<int32_t> stat_cached_blocks_{0};
  std::atomic<uint64_t> stat_preemptions_{0};
  std::atomic<bool> healthy_{true};
  // Steady-clock nanoseconds when the running forward pass began; 0 between.
  std::atomic<int64_t> step_started_ns_{0};
  bool test_stall_done_ = false;       // engine thread; for stall_first_step_for_testing_ms
  int32_t failed_steps_in_a_row_ = 0;  // engine thread
  int32_t steps_started_ = 0;          // engine thread; for fail_first_steps_for_testing

  std::thread thread_;
};

}  // namespace tessera
