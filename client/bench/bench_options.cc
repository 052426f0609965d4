#include "client/bench/bench_options.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera::bench {
namespace {

using Setter = std::function<absl::Status(const std::string&)>;

absl::Status BadValue(const std::string& flag, const std::string& value,
                      const std::string& want) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": bad value '", value, "' (want ", want, ")"));
}

// An integer in [lo, hi].
Setter IntFlag(const std::string& flag, int64_t lo, int64_t hi, std::function<void(int64_t)> set) {
  return [=](const std::string& value) {
    int64_t parsed = 0;
    if (!absl::SimpleAtoi(value, &parsed) || parsed < lo || parsed > hi) {
      return BadValue(flag, value, absl::StrCat("an integer in [", lo, ", ", hi, "]"));
    }
    set(parsed);
    return absl::OkStatus();
  };
}

// A finite number >= lo (or > lo when `open`).
Setter DoubleFlag(const std::string& flag, double lo, bool open, std::function<void(double)> set) {
  return [=](const std::string& value) {
    double parsed = 0.0;
    if (!absl::SimpleAtod(value, &parsed) || !std::isfinite(parsed) ||
        (open ? parsed <= lo : parsed < lo)) {
      return BadValue(flag, value,
                      absl::StrCat("a finite number ", open ? "> " : ">= ", lo));
    }
    set(parsed);
    return absl::OkStatus();
  };
}

std::map<std::string, Setter> ValueFlags(Options& o) {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
  std::map<std::string, Setter> flags;
  flags["--api-key"] = [&o](const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError("--api-key: empty key");
    o.api_key = v;
    return absl::OkStatus();
  };
  flags["--server"] = [&o](const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError("--server: empty address");
    o.server = v;
    return absl::OkStatus();
  };
  flags["--backend"] = [&o](const std::string& v) {
    if (v != "grpc" && v != "openai-chat" && v != "openai-completions") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--backend: expected grpc, openai-chat or openai-completions, got '", v, "'"));
    }
    o.backend = v;
    return absl::OkStatus();
  };
  flags["--base-url"] = [&o](const std::string& v) {
    if (v.rfind("http://", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--base-url: expected http://HOST:PORT, got '", v, "'"));
    }
    o.base_url = v;
    return absl::OkStatus();
  };
  for (auto [flag, field] : {std::pair{"--tls-ca", &client::ClientTls::ca_path},
                             {"--tls-cert", &client::ClientTls::cert_path},
                             {"--tls-key", &client::ClientTls::key_path}}) {
    flags[flag] = [&o, flag = std::string(flag), field = field](const std::string& v) {
      if (v.empty()) return absl::InvalidArgumentError(flag + ": empty file name");
      o.tls.*field = v;
      return absl::OkStatus();
    };
  }
  flags["--channels"] = IntFlag("--channels", 1, 1024, [&o](int64_t v) { o.channels = v; });
  flags["--concurrency"] =
      IntFlag("--concurrency", 1, 1 << 20, [&o](int64_t v) { o.concurrency = v; });
  flags["--request-rate"] =
      DoubleFlag("--request-rate", 0.0, true, [&o](double v) { o.request_rate = v; });
  flags["--burstiness"] =
      DoubleFlag("--burstiness", 0.0, true, [&o](double v) { o.burstiness = v; });
  flags["--max-concurrency"] =
      IntFlag("--max-concurrency", 1, 1 << 20, [&o](int64_t v) { o.max_concurrency = v; });
  flags["--ramp-up"] =
      DoubleFlag("--ramp-up", 0.0, false, [&o](double v) { o.ramp_up_seconds = v; });
  flags["--num-requests"] =
      IntFlag("--num-requests", 1, kMaxInt64, [&o](int64_t v) { o.num_requests = v; });
  flags["--duration"] =
      DoubleFlag("--duration", 0.0, true, [&o](double v) { o.duration_seconds = v; });
  flags["--dataset"] = [&o](const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError("--dataset: empty path");
    o.dataset = v;
    return absl::OkStatus();
  };
  flags["--input-len"] = IntFlag("--input-len", 1, kMaxInt, [&o](int64_t v) { o.input_len = v; });
  flags["--shared-prefix-len"] = IntFlag("--shared-prefix-len", 0, kMaxInt,
                                        [&o](int64_t v) { o.shared_prefix_len = v; });
  flags["--multi-turn"] = IntFlag("--multi-turn", 1, 1000, [&o](int64_t v) { o.multi_turn = v; });
  flags["--priority-mix"] = [&o](const std::string& v) {
    double parsed = 0.0;
    if (!absl::SimpleAtod(v, &parsed) || !std::isfinite(parsed) || parsed < 0.0 || parsed > 1.0) {
      return BadValue("--priority-mix", v, "a fraction in [0, 1]");
    }
    o.priority_mix = parsed;
    return absl::OkStatus();
  };
  flags["--max-tokens"] =
      IntFlag("--max-tokens", 1, kMaxInt, [&o](int64_t v) { o.max_tokens = v; });
  flags["--temperature"] =
      DoubleFlag("--temperature", 0.0, false, [&o](double v) { o.temperature = v; });
  flags["--seed"] = [&o](const std::string& v) {
    if (!absl::SimpleAtoi(v, &o.seed)) return BadValue("--seed", v, "an unsigned integer");
    return absl::OkStatus();
  };
  flags["--warmup"] = IntFlag("--warmup", 0, kMaxInt, [&o](int64_t v) { o.warmup = v; });
  flags["--save-requests"] = [&o](const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError("--save-requests: empty path");
    o.save_requests = v;
    return absl::OkStatus();
  };
  flags["--timeout"] =
      DoubleFlag("--timeout", 0.0, true, [&o](double v) { o.timeout_seconds = v; });
  return flags;
}

// Checks flag combinations and fills defaults that depend on them. `seen`
// holds the flags given.
absl::Status Resolve(Options& o, const std::map<std::string, bool>& seen) {
  auto given = [&seen](const char* flag) { return seen.count(flag) > 0; };
  if (o.open_loop() && given("--concurrency")) {
    return absl::InvalidArgumentError(
        "--concurrency is for closed-loop runs; with --request-rate use --max-concurrency");
  }
  if (!o.open_loop() && (given("--burstiness") || given("--max-concurrency"))) {
    return absl::InvalidArgumentError(
        "--burstiness and --max-concurrency need --request-rate");
  }
  if (o.open_loop() && given("--ramp-up")) {
    return absl::InvalidArgumentError("--ramp-up is for closed-loop runs (--concurrency)");
  }
  if (!o.dataset.empty() && given("--input-len")) {
    return absl::InvalidArgumentError("--input-len applies to random prompts, not --dataset");
  }
  if (!o.dataset.empty() && (o.shared_prefix_len > 0 || o.multi_turn > 1)) {
    return absl::InvalidArgumentError(
        "--shared-prefix-len and --multi-turn build random prompts, not --dataset ones");
  }
  if (!o.open_loop() && o.concurrency == 0) o.concurrency = 1;
  if (!o.num_requests && !o.duration_seconds) o.num_requests = 100;
  return absl::OkStatus();
}

}  // namespace

std::string DefaultServer() {
  const char* env = std::getenv("TESSERA_SERVER");
  return env != nullptr && *env != '\0' ? env : "localhost:50051";
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options options;
  options.server = DefaultServer();
  if (const char* key = std::getenv("TESSERA_API_KEY")) options.api_key = key;
  const std::map<std::string, Setter> value_flags = ValueFlags(options);
  std::map<std::string, bool> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> value;
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    }
    if (flag == "--help" || flag == "-h") { options.help = true; continue; }
    if (flag == "--json" || flag == "--ignore-eos") {
      if (value) return absl::InvalidArgumentError(absl::StrCat(flag, " takes no value"));
      (flag == "--json" ? options.json : options.ignore_eos) = true;
      continue;
    }
    const auto it = value_flags.find(flag);
    if (it == value_flags.end()) {
      return absl::InvalidArgumentError(
          flag.rfind("-", 0) == 0 ? absl::StrCat("unknown option ", flag)
                                  : absl::StrCat("unexpected argument '", flag, "'"));
    }
    if (!value) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(flag + " needs a value");
      value = args[++i];
    }
    if (absl::Status status = it->second(*value); !status.ok()) return status;
    seen[flag] = true;
  }
  if (options.help) return options;
  if (absl::Status status = Resolve(options, seen); !status.ok()) return status;
  return options;
}

std::string HelpText() {
  return R"(usage: tessera-bench [options]

Load-tests a tessera server with streamed Generate requests and reports
throughput and latency (TTFT, TPOT, ITL, end to end).

Connection:
  --server HOST:PORT      server address (default $TESSERA_SERVER or localhost:50051)
  --tls-ca FILE           gRPC over TLS, trusting the CA certificates in FILE
  --tls-cert FILE         client certificate for servers that require one (with --tls-key)
  --tls-key FILE          private key of --tls-cert
  --api-key KEY           API key of a server run with --api-key-file, for both backends
                          (default $TESSERA_API_KEY)
  --channels N            gRPC channels (connections) to spread requests over (default 1)
  --backend B             grpc (default), openai-completions or openai-chat: streamed
                          /v1/completions or /v1/chat/completions over HTTP (Tessera's
                          HTTP front, llama.cpp's llama-server, ...)
  --base-url URL          the OpenAI-compatible server (default http://localhost:8000)
Load (closed loop by default):
  --concurrency N         requests kept in flight (default 1)
  --request-rate R        open loop instead: R requests/s arriving at random
  --burstiness B          gamma shape of the gaps between arrivals (default 1: Poisson;
                          < 1 burstier, > 1 more regular)
  --max-concurrency N     open loop: at most N requests in flight
  --ramp-up SECONDS       closed loop: the first --concurrency requests start evenly spread
                          over SECONDS, not at once, so that the load is steady rather than
                          one burst (default 0)
Amount:
  --num-requests N        requests to measure (default 100 unless --duration)
  --duration SECONDS      stop starting requests after this; in-flight ones finish
  --warmup N              requests run and discarded first (default 2)
Prompts:
  --dataset FILE          JSON lines with a "prompt" string each, used in turn
  --input-len N           random prompts of exactly N token ids (default 128)
  --shared-prefix-len N   random prompts start with one shared N-token prefix (a system
                          prompt), then --input-len tokens of their own (default 0)
  --multi-turn K          conversations of K turns: each turn resends the history (prefix,
                          earlier questions, the server's answers) plus a new question
                          (default 1: single requests)
  --priority-mix F        send a fraction F of requests with priority -1 (the rest 0) and
                          report latency per priority (default 0)
  --seed S                seed of random prompts, arrivals and sampling (default 0)
Generation:
  --max-tokens N          tokens to generate per request (default 128)
  --ignore-eos            keep generating past the end-of-generation token
  --temperature T         sampling temperature (default 0: greedy)
  --timeout SECONDS       per-request deadline (default 600)
Output:
  --json                  print one JSON object instead of the table
  --save-requests FILE    write one JSON line per measured request: when it was sent,
                          its priority, TTFT and end (client and server side), tokens
  --help                  this text

Exit codes: 0 the run completed (even with failed requests), 1 fatal error,
2 usage error, 3 server unreachable, 130 interrupted.
)";
}

}  // namespace tessera::bench
