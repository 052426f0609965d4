// tessera-bench: a load-testing client for tessera servers. It streams
// Generate requests in a closed loop (fixed concurrency) or an open loop
// (random arrivals at a given rate) and reports throughput and latency.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/bench/bench_options.h"
#include "client/bench/openai_call.h"
#include "client/bench/prompts.h"
#include "client/bench/report.h"
#include "client/bench/runner.h"
#include "client/bench/workload.h"
#include "client/tls_channel.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::bench {
namespace {

using Stub = tessera::v1::Inference::Stub;

// How long the start-up GetModelInfo may take, in seconds.
constexpr int kInfoTimeoutSeconds = 10;

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

// The first Ctrl-C ends the run early (with a report); the handler is reset
// so that a second one kills the process.
void InstallSigintHandler() {
  struct sigaction action = {};
  action.sa_handler = OnSigint;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}

std::vector<std::unique_ptr<Stub>> MakeStubs(const Options& options) {
  std::vector<std::unique_ptr<Stub>> stubs;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      client::MakeChannelCredentials(options.tls);
  if (!credentials.ok()) {
    std::fprintf(stderr, "tessera-bench: %s\n", std::string(credentials.status().message()).c_str());
    return stubs;
  }
  for (int i = 0; i < options.channels; ++i) {
    grpc::ChannelArguments args;
    // Channels with equal arguments share one connection through gRPC's
    // global subchannel pool; a local pool gives each channel its own.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(64 << 20);
    stubs.push_back(tessera::v1::Inference::NewStub(
        grpc::CreateCustomChannel(options.server, *credentials, args)));
  }
  return stubs;
}

// Fetches the model description; fills `exit_code` on failure.
std::optional<tessera::v1::GetModelInfoResponse> FetchModelInfo(Stub& stub,
                                                                const Options& options,
                                                                int& exit_code) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(kInfoTimeoutSeconds));
  if (!options.api_key.empty()) context.AddMetadata("authorization", "Bearer " + options.api_key);
  tessera::v1::GetModelInfoResponse info;
  const grpc::Status status = stub.GetModelInfo(&context, {}, &info);
  if (status.ok()) return info;
  const bool unreachable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  std::fprintf(stderr, "tessera-bench: %s %s: %s: %s\n",
               unreachable ? "cannot reach server at" : "GetModelInfo failed at",
               options.server.c_str(), StatusCodeName(status.error_code()).c_str(),
               status.error_message().c_str());
  exit_code = unreachable ? kExitUnreachable : kExitFailure;
  return std::nullopt;
}

// Where prompts come from: a dataset, random ids, or (with a shared prefix
// or several turns) conversations.
struct Prompts {
  PromptSource source;
  std::shared_ptr<Conversations> conversations;  // null: `source`
};

absl::StatusOr<Prompts> MakePrompts(const Options& options,
                                    const tessera::v1::GetModelInfoResponse& info) {
  if (!options.dataset.empty()) {
    absl::StatusOr<std::vector<std::string>> prompts = LoadDataset(options.dataset);
    if (!prompts.ok()) return prompts.status();
    return Prompts{PromptSource::FromDataset(*std::move(prompts)), nullptr};
  }
  if (info.vocab_size() <= kMinRandomTokenId) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the model's vocabulary (", info.vocab_size(), " tokens) is too small for random prompts"));
  }
  Prompts prompts{PromptSource::Random(options.input_len, info.vocab_size(), options.seed),
                  nullptr};
  int64_t needed = static_cast<int64_t>(options.input_len) + options.max_tokens;
  if (options.shared_prefix_len > 0 || options.multi_turn > 1) {
    WorkloadShape shape{options.seed, info.vocab_size(), options.shared_prefix_len,
                        options.input_len, options.multi_turn};
    prompts.conversations = std::make_shared<Conversations>(shape);
    needed = prompts.conversations->MaxTokens(options.max_tokens);
  }
  if (info.context_length() > 0 && needed > info.context_length()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the longest prompt (", needed - options.max_tokens, " tokens) + --max-tokens ",
        options.max_tokens, " exceeds the model's context length of ", info.context_length()));
  }
  return prompts;
}

RequestFactory MakeRequestFactory(const Options& options, Prompts prompts) {
  return [options, prompts = std::move(prompts)](int64_t index) {
    tessera::v1::GenerateRequest request;
    Prompt prompt;
    if (prompts.conversations) {
      prompt.token_ids = prompts.conversations->Next(index);
    } else {
      prompt = prompts.source.Get(index);
    }
    if (prompt.token_ids.empty()) {
      request.set_text(std::move(prompt.text));
    } else {
      request.mutable_token_ids()->mutable_ids()->Assign(prompt.token_ids.begin(),
                                                         prompt.token_ids.end());
    }
    auto* sampling = request.mutable_sampling();
    sampling->set_temperature(static_cast<float>(options.temperature));
    if (options.temperature > 0.0) sampling->set_seed(options.seed + static_cast<uint64_t>(index));
    request.mutable_stopping()->set_max_tokens(options.max_tokens);
    request.mutable_stopping()->set_ignore_eos(options.ignore_eos);
    if (IsHighPriority(options.seed, index, options.priority_mix)) {
      request.set_priority(kHighPriority);
    }
    request.set_request_id(absl::StrCat("tessera-bench-", index));
    return request;
  };
}

RunPlan MeasuredPlan(const Options& options) {
  RunPlan plan;
  plan.num_requests = options.num_requests;
  plan.duration_seconds = options.duration_seconds;
  plan.max_in_flight = options.open_loop() ? options.max_concurrency : options.concurrency;
  plan.request_rate = options.request_rate;
  plan.ramp_up_seconds = options.ramp_up_seconds;
  plan.burstiness = options.burstiness;
  plan.seed = options.seed;
  plan.first_index = options.warmup;  // warmup used the indices before
  plan.show_progress = isatty(STDERR_FILENO) != 0;
  return plan;
}

// Runs the warmup requests, closed loop; says on stderr when some failed,
// since the measured run will likely fail the same way.
void Warmup(Runner& runner, const Options& options) {
  if (options.warmup == 0) return;
  RunPlan plan;
  plan.num_requests = options.warmup;
  // As many in flight as the measured run allows, so that warmup also opens
  // the connections and server threads it will use.
  const int limit = options.open_loop() ? options.max_concurrency : options.concurrency;
  plan.max_in_flight = limit > 0 ? std::min(limit, options.warmup) : options.warmup;
  const RunOutcome outcome = runner.Run(plan);
  for (const RequestRecord& record : outcome.records) {
    if (record.ok) continue;
    std::fprintf(stderr, "tessera-bench: warning: a warmup request failed: %s: %s\n",
                 StatusCodeName(record.status_code).c_str(), record.error_message.c_str());
    return;
  }
}

// The model as an OpenAI-compatible server describes it; fills `exit_code`
// on failure.
std::optional<tessera::v1::GetModelInfoResponse> FetchHttpModelInfo(const HttpTarget& target,
                                                                    const Options& options,
                                                                    int& exit_code) {
  absl::StatusOr<OpenAiModel> model = FetchOpenAiModel(target);
  if (!model.ok()) {
    std::fprintf(stderr, "tessera-bench: cannot reach server at %s: %s\n",
                 options.base_url.c_str(), std::string(model.status().message()).c_str());
    exit_code = kExitUnreachable;
    return std::nullopt;
  }
  tessera::v1::GetModelInfoResponse info;
  info.set_model_name(model->id);
  info.set_vocab_size(static_cast<int32_t>(model->vocab_size));
  info.set_context_length(static_cast<int32_t>(model->context_length));
  return info;
}

// --save-requests: the file is created before anything is sent, so that a
// path that cannot be written stops the benchmark before it loads the
// server rather than after the run. Null when the option is not given.
absl::StatusOr<std::unique_ptr<std::ofstream>> OpenSaveFile(const Options& options) {
  if (options.save_requests.empty()) return nullptr;
  auto out = std::make_unique<std::ofstream>(options.save_requests, std::ios::trunc);
  if (!*out) {
    return absl::InvalidArgumentError(
        absl::StrCat("--save-requests: cannot write ", options.save_requests, ": ",
                     std::strerror(errno)));
  }
  return out;
}

// Writes the records to the file OpenSaveFile gave; false when that fails.
bool SaveRequests(const Options& options, std::ofstream* out,
                  const std::vector<RequestRecord>& records) {
  if (out == nullptr) return true;
  *out << RecordsJsonLines(records);
  out->flush();
  if (!*out) std::fprintf(stderr, "tessera-bench: cannot write %s\n", options.save_requests.c_str());
  return static_cast<bool>(*out);
}

int Run(const Options& options) {
  int exit_code = kExitOk;
  absl::StatusOr<std::unique_ptr<std::ofstream>> save_file = OpenSaveFile(options);
  if (!save_file.ok()) {
    std::fprintf(stderr, "tessera-bench: %s\n", std::string(save_file.status().message()).c_str());
    return kExitUsage;
  }
  std::optional<tessera::v1::GetModelInfoResponse> info;
  std::vector<std::unique_ptr<Stub>> stubs;
  std::unique_ptr<OpenAiClient> http;
  std::string address = options.server;
  if (options.backend == "grpc") {
    stubs = MakeStubs(options);
    if (stubs.empty()) return kExitUsage;
    info = FetchModelInfo(*stubs.front(), options, exit_code);
  } else {
    absl::StatusOr<HttpTarget> target = ParseBaseUrl(options.base_url);
    if (!target.ok()) {
      std::fprintf(stderr, "tessera-bench: %s\n", std::string(target.status().message()).c_str());
      return kExitUsage;
    }
    target->api_key = options.api_key;
    info = FetchHttpModelInfo(*target, options, exit_code);
    if (info) {
      http = std::make_unique<OpenAiClient>(*target, info->model_name(),
                                            options.backend == "openai-chat");
      // Kept-alive connections, one per request in flight at most.
      const int in_flight = options.concurrency > 0 ? options.concurrency : options.max_concurrency;
      http->Preconnect(std::min(in_flight > 0 ? in_flight : 64, 1024));
    }
    address = options.base_url;
  }
  if (!info) return exit_code;
  absl::StatusOr<Prompts> prompts = MakePrompts(options, *info);
  if (!prompts.ok()) {
    std::fprintf(stderr, "tessera-bench: %s\n", std::string(prompts.status().message()).c_str());
    return kExitFailure;
  }
  std::shared_ptr<Conversations> conversations = prompts->conversations;
  Runner runner(http ? http->Launcher() : GrpcLauncher(std::move(stubs), options.api_key),
                MakeRequestFactory(options, *std::move(prompts)), options.timeout_seconds,
                &g_interrupted);
  if (conversations) {
    // Each turn resends the history with the server's real answer (gRPC
    // reports the answer's token ids; the HTTP backends resend none).
    runner.SetOnFinished([conversations](const RequestRecord& record) {
      conversations->Done(record.index, record.ok, record.output_ids);
    });
  }
  Warmup(runner, options);
  if (g_interrupted.load()) return kExitInterrupted;
  const RunOutcome outcome = runner.Run(MeasuredPlan(options));
  const BenchResult result = Aggregate(outcome.records, outcome.duration_seconds);
  const ModelSummary model{info->model_name(), address};
  const bool saved = SaveRequests(options, save_file->get(), outcome.records);
  if (options.json) {
    std::cout << ToJson(result, options, model).dump(2) << std::endl;
  } else {
    std::cout << FormatTable(result, options, model) << std::flush;
  }
  if (outcome.interrupted) return kExitInterrupted;
  return saved ? kExitOk : kExitFailure;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  using namespace tessera::bench;
  const absl::StatusOr<Options> options =
      ParseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::fprintf(stderr, "tessera-bench: %s\nTry 'tessera-bench --help'.\n",
                 std::string(options.status().message()).c_str());
    return kExitUsage;
  }
  if (options->help) {
    std::fputs(HelpText().c_str(), stdout);
    return kExitOk;
  }
  InstallSigintHandler();
  return Run(*options);
}
