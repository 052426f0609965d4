// The result of a benchmark run: aggregation and output as a table or JSON.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/bench/bench_options.h"
#include "client/bench/stats.h"
#include "client/bench/timeline.h"

namespace tessera::bench {

// The gRPC name of a status code ("RESOURCE_EXHAUSTED"), or "CODE_<n>".
std::string StatusCodeName(int code);

struct BenchResult {
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_seconds = 0.0;  // first send to last final status
  int64_t input_tokens = 0;       // prompt tokens of completed requests
  int64_t output_tokens = 0;      // generated tokens of completed requests
  // Of input_tokens, those the server found in its prefix cache.
  int64_t cached_prompt_tokens = 0;
  // Latencies of completed requests, in seconds.
  Summary ttft;
  Summary tpot;  // requests with at least two tokens
  Summary itl;
  Summary e2e;
  // Per request priority (completed requests): count, TTFT and end to end.
  struct PriorityClass {
    int64_t completed = 0;
    Summary ttft;
    Summary e2e;
  };
  std::map<int32_t, PriorityClass> by_priority;
  std::map<std::string, int64_t> errors;               // code name -> count
  std::map<std::string, std::string> error_examples;   // code name -> a message

  double RequestThroughput() const;      // completed requests per second
  double OutputTokensPerSecond() const;
  double TotalTokensPerSecond() const;   // prompt + output tokens per second
  // Prompt tokens the server computed (not found in its prefix cache).
  int64_t PrefillTokensComputed() const { return input_tokens - cached_prompt_tokens; }
};

// Aggregates the records of a run that took `duration_seconds`.
BenchResult Aggregate(const std::vector<RequestRecord>& records, double duration_seconds);

// Describes the server's model in the report.
struct ModelSummary {
  std::string name;
  std::string server;
};

// The --json object: results in seconds plus the run's configuration.
nlohmann::json ToJson(const BenchResult& result, const Options& options,
                      const ModelSummary& model);

// The human-readable report, latencies in milliseconds.
// One JSON object per request, in the order they were sent: the lines of
// --save-requests.
std::string RecordsJsonLines(std::vector<RequestRecord> records);

std::string FormatTable(const BenchResult& result, const Options& options,
                        const ModelSummary& model);

}  // namespace tessera::bench
