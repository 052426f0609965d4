#include "server/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tessera::server {
namespace {

using Setter = std::function<absl::Status(const std::string& value, ServerOptions& options)>;

struct Flag {
  const char* name;  // without the leading "--"
  const char* value_name;  // nullptr: a switch that takes no value (env: 1/true or 0/false)
  const char* help;
  Setter set;
};

absl::Status ParseInt(const std::string& text, int64_t low, int64_t high, int64_t* out) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < low || value > high) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an integer in [", low, ", ", high, "], got '", text, "'"));
  }
  *out = value;
  return absl::OkStatus();
}

template <typename T>
Setter IntSetter(T ServerOptions::*field, int64_t low, int64_t high) {
  return [=](const std::string& text, ServerOptions& options) {
    int64_t value = 0;
    absl::Status status = ParseInt(text, low, high, &value);
    if (status.ok()) options.*field = static_cast<T>(value);
    return status;
  };
}

Setter EngineIntSetter(int32_t EngineOptions::*field, int64_t low) {
  return [=](const std::string& text, ServerOptions& options) {
    int64_t value = 0;
    absl::Status status = ParseInt(text, low, std::numeric_limits<int32_t>::max(), &value);
    if (status.ok()) options.engine.*field = static_cast<int32_t>(value);
    return status;
  };
}

// Bytes, with an optional binary suffix: K, M, G or T (also KiB, MiB...).
absl::Status ParseBytes(const std::string& text, int64_t* out) {
  std::string digits = absl::AsciiStrToUpper(text);
  int shift = 0;
  for (auto [suffix, bits] : {std::pair{"KIB", 10},
                              {"MIB", 20},
                              {"GIB", 30},
                              {"TIB", 40},
                              {"K", 10},
                              {"M", 20},
                              {"G", 30},
                              {"T", 40}}) {
    if (absl::EndsWith(digits, suffix)) {
      digits.resize(digits.size() - absl::string_view(suffix).size());
      shift = bits;
      break;
    }
  }
  int64_t value = 0;
  const int64_t max = std::numeric_limits<int64_t>::max() >> shift;
  if (!ParseInt(digits, 0, max, &value).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a byte count such as 1073741824 or 1G, got '", text, "'"));
  }
  *out = value << shift;
  return absl::OkStatus();
}

absl::Status SetKvCacheBytes(const std::string& text, ServerOptions& options) {
  return ParseBytes(text, &options.engine.kv_cache_bytes);
}

absl::Status ParseSeconds(const std::string& text, std::chrono::milliseconds* out) {
  double seconds = 0;
  // At most a day: more is surely a mistake (and keeps the conversion safe).
  if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) || seconds < 0 ||
      seconds > 86400) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected seconds in [0, 86400], got '", text, "'"));
  }
  *out = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  return absl::OkStatus();
}

// A duration flag given in seconds.
Setter SecondsSetter(std::chrono::milliseconds ServerOptions::*field) {
  return [=](const std::string& text, ServerOptions& options) {
    return ParseSeconds(text, &(options.*field));
  };
}

absl::Status SetHttpMaxBody(const std::string& text, ServerOptions& options) {
  int64_t bytes = 0;
  absl::Status status = ParseBytes(text, &bytes);
  if (!status.ok() || bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a byte count >= 1 such as 8388608 or 8M, got '", text, "'"));
  }
  options.http_max_body_bytes = bytes;
  return absl::OkStatus();
}

// A GrpcLimits duration in seconds; 0 only where `zero_allowed` (it turns the
// limit off).
Setter GrpcSeconds(std::chrono::milliseconds GrpcLimits::*field, bool zero_allowed) {
  return [=](const std::string& text, ServerOptions& options) {
    std::chrono::milliseconds value{0};
    absl::Status status = ParseSeconds(text, &value);
    if (status.ok() && value.count() == 0 && !zero_allowed) {
      status = absl::InvalidArgumentError(
          absl::StrCat("expected seconds in [0.001, 86400], got '", text, "'"));
    }
    if (status.ok()) options.grpc.*field = value;
    return status;
  };
}

Setter GrpcInt(int32_t GrpcLimits::*field, int64_t high) {
  return [=](const std::string& text, ServerOptions& options) {
    int64_t value = 0;
    absl::Status status = ParseInt(text, 0, high, &value);
    if (status.ok()) options.grpc.*field = static_cast<int32_t>(value);
    return status;
  };
}

// One synchronous handler thread refuses every call (it is the one that
// polls); two serve one at a time.
absl::Status SetGrpcMaxThreads(const std::string& text, ServerOptions& options) {
  int64_t value = 0;
  if (!ParseInt(text, 0, 100000, &value).ok() || value == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 0 (no cap) or a thread count in [2, 100000], got '", text, "'"));
  }
  options.grpc.max_threads = static_cast<int32_t>(value);
  return absl::OkStatus();
}

// Less than a megabyte cannot hold one connection's buffers.
absl::Status SetGrpcMemoryQuota(const std::string& text, ServerOptions& options) {
  int64_t bytes = 0;
  absl::Status status = ParseBytes(text, &bytes);
  if (!status.ok() || (bytes != 0 && bytes < (int64_t{1} << 20))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected 0 (no quota) or a byte count >= 1M such as 2G, got '", text, "'"));
  }
  options.grpc.memory_quota = bytes;
  return absl::OkStatus();
}

absl::Status SetTlsRefreshInterval(const std::string& text, ServerOptions& options) {
  int64_t seconds = 0;
  absl::Status status = ParseInt(text, 1, 86400, &seconds);
  if (status.ok()) options.tls.refresh_interval = std::chrono::seconds(seconds);
  return status;
}

absl::Status SetGpuMemoryUtilization(const std::string& text, ServerOptions& options) {
  double fraction = 0;
  if (!absl::SimpleAtod(text, &fraction) || !std::isfinite(fraction) || fraction <= 0 ||
      fraction > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a fraction in (0, 1], got '", text, "'"));
  }
  options.engine.gpu_memory_utilization = static_cast<float>(fraction);
  return absl::OkStatus();
}

absl::Status SetPriorityAging(const std::string& text, ServerOptions& options) {
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) || seconds < 0 ||
      seconds > 86400) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected seconds in [0, 86400], got '", text, "'"));
  }
  options.engine.priority_aging_seconds = seconds;
  return absl::OkStatus();
}

// A switch: "true" from the command line; 1/true/0/false from the environment.
Setter Switch(bool value_when_on, bool& (*field)(ServerOptions&)) {
  return [=](const std::string& text, ServerOptions& options) {
    const std::string v = absl::AsciiStrToLower(text);
    if (v == "1" || v == "true") {
      field(options) = value_when_on;
    } else if (v == "0" || v == "false") {
      field(options) = !value_when_on;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("expected 1, true, 0 or false, got '", text, "'"));
    }
    return absl::OkStatus();
  };
}

Setter OneOf(std::vector<std::string> allowed, std::string& (*field)(ServerOptions&)) {
  return [=](const std::string& text, ServerOptions& options) {
    for (const std::string& a : allowed) {
      if (text == a) {
        field(options) = text;
        return absl::OkStatus();
      }
    }
    std::string list;
    for (const std::string& a : allowed) absl::StrAppend(&list, list.empty() ? "" : ", ", a);
    return absl::InvalidArgumentError(absl::StrCat("expected one of ", list, ", got '", text, "'"));
  };
}

Setter NonEmpty(std::string& (*field)(ServerOptions&)) {
  return [=](const std::string& text, ServerOptions& options) {
    if (text.empty()) return absl::InvalidArgumentError("must not be empty");
    field(options) = text;
    return absl::OkStatus();
  };
}

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      {"model", "PATH", "GGUF model file or Hugging Face model folder to serve (required)",
       NonEmpty([](ServerOptions& o) -> std::string& { return o.engine.model_path; })},
      {"host", "ADDR", "address to serve gRPC on (default 0.0.0.0)",
       NonEmpty([](ServerOptions& o) -> std::string& { return o.host; })},
      {"port", "N", "gRPC port; 0 picks a free one (default 50051)",
       IntSetter(&ServerOptions::port, 0, 65535)},
      {"chat-template", "FILE",
       "Jinja chat template that replaces the model's own (default: the model's)",
       NonEmpty([](ServerOptions& o) -> std::string& { return o.engine.chat_template_path; })},
      {"metrics-host", "ADDR", "address to serve /metrics on (default: the --host address)",
       NonEmpty([](ServerOptions& o) -> std::string& { return o.metrics_host; })},
      {"metrics-port", "N", "Prometheus /metrics port; 0 disables (default 9090)",
       IntSetter(&ServerOptions::metrics_port, 0, 65535)},
      {"http-port", "N", "OpenAI-compatible HTTP port; 0 disables (default 8000)",
       IntSetter(&ServerOptions::http_port, 0, 65535)},
      {"http-max-body", "BYTES", "largest HTTP request body; larger ones get 413 (default 8M)",
       SetHttpMaxBody},
      {"http-header-timeout", "SECONDS",
       "time a client has to send an HTTP request once it started it (default 10)",
       SecondsSetter(&ServerOptions::http_header_timeout)},
      {"http-idle-timeout", "SECONDS",
       "how long an idle HTTP keep-alive connection is kept open (default 60)",
       SecondsSetter(&ServerOptions::http_idle_timeout)},
      {"tls-cert", "FILE",
       "PEM certificate chain: the gRPC and HTTP ports serve TLS (needs --tls-key; reloaded "
       "when the file changes)",
       NonEmpty([](ServerOptions& o) -> std::string& { return o.tls.cert_path; })},
      {"tls-key", "FILE", "PEM private key of --tls-cert",
       NonEmpty([](ServerOptions& o) -> std::string& { return o.tls.key_path; })},
      {"tls-client-ca", "FILE",
       "PEM CA bundle: mutual TLS, clients must present a certificate it signed",
       NonEmpty([](ServerOptions& o) -> std::string& { return o.tls.client_ca_path; })},
      {"metrics-tls", nullptr,
       "the metrics port serves HTTPS too, with --tls-cert/--tls-key (and client certificates "
       "with --tls-client-ca) (default: plain HTTP, for Prometheus)",
       Switch(true, [](ServerOptions& o) -> bool& { return o.metrics_tls; })},
      {"tls-refresh-interval", "SECONDS",
       "how often the TLS files are checked for new certificates (default 60)",
       SetTlsRefreshInterval},
      {"device", "cpu|cuda|auto", "where the model runs (default auto)",
       OneOf({"cpu", "cuda", "auto"},
             [](ServerOptions& o) -> std::string& { return o.engine.device; })},
      {"cpu-matmul", "auto|f32|bf16",
       "CPU matrix products: f32, or bf16 with AVX512-BF16 or AMX tiles (faster; rounds weights "
       "and activations to bf16); auto is bf16 for f16/bf16 models on CPUs with either "
       "(default auto)",
       OneOf({"auto", "f32", "bf16"},
             [](ServerOptions& o) -> std::string& { return o.engine.cpu_matmul; })},
      {"threads", "N", "CPU threads; 0 uses every core (default 0)",
       EngineIntSetter(&EngineOptions::num_threads, 0)},
      {"max-queued-requests", "N", "waiting requests before RESOURCE_EXHAUSTED (default 256)",
       EngineIntSetter(&EngineOptions::max_queued_requests, 1)},
      {"max-num-seqs", "N", "sequences in one engine step (default 64)",
       EngineIntSetter(&EngineOptions::max_num_seqs, 1)},
      {"max-batched-tokens", "N", "tokens in one engine step; smaller chunks of long prompts start decoding sooner (default 512)",
       EngineIntSetter(&EngineOptions::max_batched_tokens, 1)},
      {"prefill-group-tokens", "N",
       "a prompt that one step would prefill whole joins a step only while it prefills fewer "
       "than N tokens, so that a burst of short prompts gets first tokens a few at a time; 0: "
       "no limit (default 128 on the CPU, 0 on CUDA)",
       EngineIntSetter(&EngineOptions::prefill_group_tokens, 0)},
      {"kv-cache-memory", "BYTES", "KV cache size, e.g. 2G; 0 picks a default (default 0)",
       SetKvCacheBytes},
      {"context-length", "N",
       "longest prompt + output a request may ask for, at most the model's; Phi-3 long-rope "
       "models use their short-context RoPE factors up to their training context (vLLM's "
       "--max-model-len, llama.cpp's -c per slot); 0: the model's (default 0)",
       EngineIntSetter(&EngineOptions::context_length, 0)},
      {"no-prefix-caching", nullptr,
       "turn off automatic prefix caching (on by default: full KV blocks stay cached and are "
       "shared by prompts that start with the same tokens)",
       Switch(false, [](ServerOptions& o) -> bool& { return o.engine.enable_prefix_caching; })},
      {"scheduling-policy", "fcfs|priority",
       "fcfs: arrival order; priority: lower GenerateRequest.priority first, preempting less "
       "urgent requests when the batch or KV cache is full (default fcfs)",
       OneOf({"fcfs", "priority"},
             [](ServerOptions& o) -> std::string& { return o.engine.scheduling_policy; })},
      {"priority-aging-seconds", "SECONDS",
       "priority policy: seconds of waiting that make a request one priority level more "
       "urgent, bounding starvation; 0 disables aging (default 10)",
       SetPriorityAging},
      {"block-size", "N", "tokens per KV cache block (default 16)",
       EngineIntSetter(&EngineOptions::block_size, 1)},
      {"kv-cache-dtype", "auto|f32|f16|int8",
       "KV cache element type; auto is f16 for f16/bf16 and quantized weights, else f32; "
       "int8 (CPU only) stores each token's head vector as int8 with an f32 scale, about "
       "half of f16's bytes (default auto)",
       OneOf({"auto", "f32", "f16", "int8"},
             [](ServerOptions& o) -> std::string& { return o.engine.kv_cache_dtype; })},
      {"gpu-memory-utilization", "FRACTION",
       "CUDA: fraction of the GPU's free memory, after weights and workspaces, for the KV "
       "cache when --kv-cache-memory is 0 (default 0.9)",
       SetGpuMemoryUtilization},
      {"dtype", "auto|f16|bf16|f32",
       "CUDA: weight type on the GPU; auto keeps f16/bf16 weights and stores f32 ones as f16; "
       "f32 is exact, for parity runs (default auto)",
       OneOf({"auto", "f16", "bf16", "f32"},
             [](ServerOptions& o) -> std::string& { return o.engine.dtype; })},
      {"drain-timeout", "SECONDS",
       "on SIGTERM, how long requests in flight may finish (default 30)",
       SecondsSetter(&ServerOptions::drain_timeout)},
      {"step-watchdog", "SECONDS",
       "an engine step running longer is reported as stalled: logged, counted in "
       "tessera_engine_stalled_steps_total, health NOT_SERVING until it ends; 0 disables "
       "(default 60)",
       SecondsSetter(&ServerOptions::step_watchdog)},
      {"api-key-file", "FILE",
       "require an API key on every call: one key per line, or name:key (# comments); "
       "reloaded on SIGHUP (default: no keys)",
       NonEmpty([](ServerOptions& o) -> std::string& { return o.api_key_file; })},
      {"auth-health", nullptr,
       "with --api-key-file, health checks (gRPC grpc.health.v1, HTTP /health) need a key too "
       "(default: open, for probes)",
       Switch(true, [](ServerOptions& o) -> bool& { return o.auth_health; })},
      {"max-queued-requests-per-key", "N",
       "with --api-key-file: waiting requests of one API key before RESOURCE_EXHAUSTED (HTTP "
       "429), so that one tenant cannot starve the others; 0: no cap (default 0)",
       IntSetter(&ServerOptions::max_queued_requests_per_key, 0, std::numeric_limits<int32_t>::max())},
      {"max-concurrent-streams", "N",
       "gRPC calls open at once on one connection; more wait in the client until one ends "
       "(HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); 0: no limit (default 256)",
       GrpcInt(&GrpcLimits::max_concurrent_streams, 1000000)},
      {"max-connection-idle", "SECONDS",
       "close gRPC connections that have had no call for this long (GOAWAY; clients reconnect "
       "on their next call); 0 disables (default 0: idle connections cost little)",
       GrpcSeconds(&GrpcLimits::max_connection_idle, true)},
      {"max-connection-age", "SECONDS",
       "send GOAWAY to gRPC connections this old (+-10% jitter), so that clients reconnect, "
       "re-resolve DNS and spread over new replicas; 0 disables (default 0: reconnects cost "
       "a handshake; set it, e.g. 300, behind client-side load balancing)",
       GrpcSeconds(&GrpcLimits::max_connection_age, true)},
      {"max-connection-age-grace", "SECONDS",
       "after --max-connection-age, how long calls in flight may finish before the "
       "connection is closed; 0: as long as they take (default 0)",
       GrpcSeconds(&GrpcLimits::max_connection_age_grace, true)},
      {"keepalive-time", "SECONDS",
       "ping gRPC clients whose connection has been quiet this long, to find dead peers and "
       "keep NAT and load balancer state alive; 0 disables (default 60)",
       GrpcSeconds(&GrpcLimits::keepalive_time, true)},
      {"keepalive-timeout", "SECONDS",
       "close a connection whose keepalive ping is not answered within this (default 20)",
       GrpcSeconds(&GrpcLimits::keepalive_timeout, false)},
      {"keepalive-min-client-interval", "SECONDS",
       "clients pinging more often than this (idle connections included) get GOAWAY "
       "too_many_pings after 2 such pings; 0: any rate (default 10)",
       GrpcSeconds(&GrpcLimits::keepalive_min_client_interval, true)},
      {"grpc-max-threads", "N",
       "threads of synchronous gRPC handlers (server reflection; the inference and health "
       "services run on gRPC's callback threads), beyond which their calls get "
       "RESOURCE_EXHAUSTED; 0: no cap (default 64)",
       SetGrpcMaxThreads},
      {"grpc-memory-quota", "BYTES",
       "memory of the gRPC transport's buffers, e.g. 512M; near it gRPC shrinks buffers, "
       "then closes idle connections and cancels calls; 0: no quota (default 0)",
       SetGrpcMemoryQuota},
      {"log-level", "LEVEL", "trace, debug, info, warn, error, critical or off (default info)",
       OneOf({"trace", "debug", "info", "warn", "error", "critical", "off"},
             [](ServerOptions& o) -> std::string& { return o.log_level; })},
  };
  return flags;
}

const Flag* FindFlag(absl::string_view name) {
  for (const Flag& flag : Flags()) {
    if (name == flag.name) return &flag;
  }
  return nullptr;
}

std::string EnvName(const Flag& flag) {
  return "TESSERA_" + absl::AsciiStrToUpper(absl::StrReplaceAll(flag.name, {{"-", "_"}}));
}

absl::Status Apply(const Flag& flag, const std::string& value, absl::string_view source,
                   ServerOptions& options) {
  absl::Status status = flag.set(value, options);
  if (status.ok()) return status;
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", status.message()));
}

absl::Status ApplyEnvironment(const EnvLookup& env, ServerOptions& options) {
  for (const Flag& flag : Flags()) {
    const std::string name = EnvName(flag);
    if (std::optional<std::string> value = env(name)) {
      absl::Status status = Apply(flag, *value, name, options);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyArguments(int argc, const char* const* argv, ParsedFlags& parsed) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    arg.remove_prefix(2);
    const size_t eq = arg.find('=');
    const Flag* flag = FindFlag(arg.substr(0, eq));
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '--", arg.substr(0, eq), "'"));
    }
    std::string value;
    if (flag->value_name == nullptr) {
      if (eq != absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag->name, " takes no value"));
      }
      value = "true";
    } else if (eq != absl::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", flag->name, " needs a value"));
    }
    absl::Status status = Apply(*flag, value, absl::StrCat("--", flag->name), parsed.options);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedFlags> ParseFlags(int argc, const char* const* argv, const EnvLookup& env) {
  ParsedFlags parsed;
  absl::Status status = ApplyEnvironment(env, parsed.options);
  if (!status.ok()) return status;
  status = ApplyArguments(argc, argv, parsed);
  if (!status.ok()) return status;
  if (!parsed.help && parsed.options.engine.model_path.empty()) {
    return absl::InvalidArgumentError("--model is required (or TESSERA_MODEL)");
  }
  return parsed;
}

std::optional<std::string> GetEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string FlagsHelp(const std::string& program) {
  std::string help = absl::StrCat("Usage: ", program,
                                  " --model PATH [flags]\n\nServes a GGUF language model over "
                                  "gRPC (tessera.v1.Inference).\n\nFlags:\n");
  for (const Flag& flag : Flags()) {
    std::string head =
        absl::StrCat("  --", flag.name, flag.value_name ? " " : "", flag.value_name ? flag.value_name : "");
    head.resize(std::max<size_t>(head.size() + 1, 36), ' ');
    absl::StrAppend(&help, head, flag.help, "\n", std::string(36, ' '), "env ", EnvName(flag),
                    "\n");
  }
  absl::StrAppend(&help, "  --help                            this text\n");
  return help;
}

}  // namespace tessera::server
