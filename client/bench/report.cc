#include "client/bench/report.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::bench {
namespace {

double PerSecond(double amount, double seconds) {
  return seconds > 0.0 ? amount / seconds : 0.0;
}

nlohmann::json SummaryJson(const Summary& summary) {
  return {{"mean", summary.mean}, {"p50", summary.p50}, {"p90", summary.p90},
          {"p99", summary.p99}};
}

template <typename T>
nlohmann::json OrNull(bool present, const T& value) {
  return present ? nlohmann::json(value) : nlohmann::json(nullptr);
}

// "closed loop, concurrency 8 (ramp-up 2 s)" or "open loop, 20 req/s (burstiness 1), ...".
std::string LoadLine(const Options& options) {
  if (!options.open_loop()) {
    std::string line = absl::StrCat("closed loop, concurrency ", options.concurrency);
    if (options.ramp_up_seconds > 0) {
      absl::StrAppendFormat(&line, " (ramp-up %g s)", options.ramp_up_seconds);
    }
    return line;
  }
  std::string line = absl::StrFormat("open loop, %g req/s (burstiness %g)",
                                     *options.request_rate, options.burstiness);
  if (options.max_concurrency > 0) {
    absl::StrAppend(&line, ", max concurrency ", options.max_concurrency);
  }
  return line;
}

std::string LatencyRow(const char* name, const Summary& s) {
  constexpr double kMs = 1e3;
  return absl::StrFormat("%-6s %10.2f %10.2f %10.2f %10.2f\n", name, s.mean * kMs,
                         s.p50 * kMs, s.p90 * kMs, s.p99 * kMs);
}

}  // namespace

std::string StatusCodeName(int code) {
  // Indexed by grpc::StatusCode.
  static constexpr std::array<const char*, 17> kNames = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
  };
  if (code >= 0 && code < static_cast<int>(kNames.size())) return kNames[code];
  return absl::StrCat("CODE_", code);
}

double BenchResult::RequestThroughput() const {
  return PerSecond(static_cast<double>(completed), duration_seconds);
}

double BenchResult::OutputTokensPerSecond() const {
  return PerSecond(static_cast<double>(output_tokens), duration_seconds);
}

double BenchResult::TotalTokensPerSecond() const {
  return PerSecond(static_cast<double>(input_tokens + output_tokens), duration_seconds);
}

BenchResult Aggregate(const std::vector<RequestRecord>& records, double duration_seconds) {
  BenchResult result;
  result.duration_seconds = duration_seconds;
  std::vector<double> ttft, tpot, itl, e2e;
  std::map<int32_t, std::pair<std::vector<double>, std::vector<double>>> by_priority;
  for (const RequestRecord& record : records) {
    if (!record.ok) {
      ++result.failed;
      const std::string name = StatusCodeName(record.status_code);
      ++result.errors[name];
      result.error_examples.emplace(name, record.error_message);
      continue;
    }
    ++result.completed;
    result.input_tokens += record.prompt_tokens;
    result.output_tokens += record.output_tokens;
    result.cached_prompt_tokens += record.cached_prompt_tokens;
    auto& [class_ttft, class_e2e] = by_priority[record.priority];
    if (record.output_tokens > 0) class_ttft.push_back(record.ttft);
    class_e2e.push_back(record.e2e);
    if (record.output_tokens > 0) ttft.push_back(record.ttft);
    if (record.output_tokens > 1) tpot.push_back(record.Tpot());
    itl.insert(itl.end(), record.itl.begin(), record.itl.end());
    e2e.push_back(record.e2e);
  }
  result.ttft = Summarize(std::move(ttft));
  result.tpot = Summarize(std::move(tpot));
  result.itl = Summarize(std::move(itl));
  result.e2e = Summarize(std::move(e2e));
  for (auto& [priority, samples] : by_priority) {
    BenchResult::PriorityClass& c = result.by_priority[priority];
    c.completed = static_cast<int64_t>(samples.second.size());
    c.ttft = Summarize(std::move(samples.first));
    c.e2e = Summarize(std::move(samples.second));
  }
  return result;
}

std::string RecordsJsonLines(std::vector<RequestRecord> records) {
  std::sort(records.begin(), records.end(), [](const RequestRecord& a, const RequestRecord& b) {
    return a.sent_at != b.sent_at ? a.sent_at < b.sent_at : a.index < b.index;
  });
  std::string out;
  for (const RequestRecord& r : records) {
    nlohmann::json line = {{"index", r.index},
                           {"ok", r.ok},
                           {"status", StatusCodeName(r.status_code)},
                           {"priority", r.priority},
                           {"sent_at_seconds", r.sent_at},
                           {"ttft_seconds", r.ttft},
                           {"e2e_seconds", r.e2e},
                           {"prompt_tokens", r.prompt_tokens},
                           {"cached_prompt_tokens", r.cached_prompt_tokens},
                           {"output_tokens", r.output_tokens}};
    if (r.server_ttft >= 0) {
      line["server_queue_seconds"] = r.server_queue;
      line["server_ttft_seconds"] = r.server_ttft;
    }
    out += line.dump() + "\n";
  }
  return out;
}

nlohmann::json ToJson(const BenchResult& result, const Options& options,
                      const ModelSummary& model) {
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [name, count] : result.errors) errors[name] = count;
  nlohmann::json by_priority = nlohmann::json::object();
  for (const auto& [priority, c] : result.by_priority) {
    by_priority[std::to_string(priority)] = {{"completed", c.completed},
                                             {"ttft_seconds", SummaryJson(c.ttft)},
                                             {"e2e_seconds", SummaryJson(c.e2e)}};
  }
  const bool random_prompts = options.dataset.empty();
  return {
      {"completed", result.completed},
      {"failed", result.failed},
      {"duration_seconds", result.duration_seconds},
      {"request_throughput", result.RequestThroughput()},
      {"output_tokens_per_second", result.OutputTokensPerSecond()},
      {"total_tokens_per_second", result.TotalTokensPerSecond()},
      {"total_input_tokens", result.input_tokens},
      {"total_output_tokens", result.output_tokens},
      {"cached_prompt_tokens", result.cached_prompt_tokens},
      {"prefill_tokens_computed", result.PrefillTokensComputed()},
      {"by_priority", by_priority},
      {"ttft_seconds", SummaryJson(result.ttft)},
      {"tpot_seconds", SummaryJson(result.tpot)},
      {"itl_seconds", SummaryJson(result.itl)},
      {"e2e_seconds", SummaryJson(result.e2e)},
      {"errors", errors},
      {"server", model.server},
      {"model", model.name},
      {"concurrency", OrNull(!options.open_loop(), options.concurrency)},
      {"request_rate", OrNull(options.open_loop(), options.request_rate.value_or(0.0))},
      {"burstiness", options.burstiness},
      {"max_concurrency", OrNull(options.max_concurrency > 0, options.max_concurrency)},
      {"ramp_up_seconds", options.ramp_up_seconds},
      {"num_requests", OrNull(options.num_requests.has_value(), options.num_requests.value_or(0))},
      {"duration_limit_seconds",
       OrNull(options.duration_seconds.has_value(), options.duration_seconds.value_or(0.0))},
      {"dataset", OrNull(!random_prompts, options.dataset)},
      {"input_len", OrNull(random_prompts, options.input_len)},
      {"shared_prefix_len", options.shared_prefix_len},
      {"multi_turn", options.multi_turn},
      {"priority_mix", options.priority_mix},
      {"max_tokens", options.max_tokens},
      {"ignore_eos", options.ignore_eos},
      {"temperature", options.temperature},
      {"seed", options.seed},
      {"warmup", options.warmup},
      {"channels", options.channels},
  };
}

std::string FormatTable(const BenchResult& result, const Options& options,
                        const ModelSummary& model) {
  std::string out = absl::StrFormat("tessera-bench: %s at %s, %s\n", model.name, model.server,
                                    LoadLine(options));
  absl::StrAppendFormat(&out, "%-30s %12d\n", "Requests completed", result.completed);
  absl::StrAppendFormat(&out, "%-30s %12d\n", "Requests failed", result.failed);
  absl::StrAppendFormat(&out, "%-30s %12.3f\n", "Duration (s)", result.duration_seconds);
  absl::StrAppendFormat(&out, "%-30s %12d\n", "Prompt tokens", result.input_tokens);
  absl::StrAppendFormat(&out, "%-30s %12d\n", "Output tokens", result.output_tokens);
  absl::StrAppendFormat(&out, "%-30s %12d\n", "Cached prompt tokens",
                        result.cached_prompt_tokens);
  absl::StrAppendFormat(&out, "%-30s %12d\n", "Prefill tokens computed",
                        result.PrefillTokensComputed());
  absl::StrAppendFormat(&out, "%-30s %12.2f\n", "Request throughput (req/s)",
                        result.RequestThroughput());
  absl::StrAppendFormat(&out, "%-30s %12.2f\n", "Output tokens/s", result.OutputTokensPerSecond());
  absl::StrAppendFormat(&out, "%-30s %12.2f\n", "Total tokens/s", result.TotalTokensPerSecond());
  absl::StrAppendFormat(&out, "\n%-6s %10s %10s %10s %10s\n", "(ms)", "mean", "p50", "p90", "p99");
  out += LatencyRow("TTFT", result.ttft);
  out += LatencyRow("TPOT", result.tpot);
  out += LatencyRow("ITL", result.itl);
  out += LatencyRow("E2E", result.e2e);
  if (result.by_priority.size() > 1 || options.priority_mix > 0) {
    for (const auto& [priority, c] : result.by_priority) {
      absl::StrAppendFormat(&out, "\nPriority %d (%d requests)\n", priority, c.completed);
      out += LatencyRow("TTFT", c.ttft);
      out += LatencyRow("E2E", c.e2e);
    }
  }
  if (!result.errors.empty()) {
    out += "\nErrors\n";
    for (const auto& [name, count] : result.errors) {
      const auto example = result.error_examples.find(name);
      absl::StrAppendFormat(&out, "  %-22s %8d", name, count);
      if (example != result.error_examples.end() && !example->second.empty()) {
        absl::StrAppend(&out, "  (", example->second, ")");
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace tessera::bench
