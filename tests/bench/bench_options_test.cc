// Unit tests of tessera-bench's option parsing, reports and progress line.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/bench/bench_options.h"
#include "client/bench/progress.h"
#include "client/bench/report.h"

namespace tessera::bench {
namespace {

// --- Options ---

absl::StatusOr<Options> Parse(std::vector<std::string> args) { return ParseOptions(args); }

TEST(OptionsTest, DefaultsAreAClosedLoopOfOneHundredRequests) {
  unsetenv("TESSERA_SERVER");
  const auto options = Parse({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->server, "localhost:50051");
  EXPECT_FALSE(options->open_loop());
  EXPECT_EQ(options->concurrency, 1);
  EXPECT_EQ(options->num_requests, 100);
  EXPECT_FALSE(options->duration_seconds.has_value());
  EXPECT_EQ(options->input_len, 128);
  EXPECT_EQ(options->max_tokens, 128);
  EXPECT_EQ(options->warmup, 2);
  EXPECT_EQ(options->channels, 1);
  EXPECT_DOUBLE_EQ(options->timeout_seconds, 600.0);
  EXPECT_DOUBLE_EQ(options->temperature, 0.0);
  EXPECT_FALSE(options->json);
  EXPECT_FALSE(options->ignore_eos);
}

TEST(OptionsTest, ApiKeyComesFromTheFlagOrTheEnvironment) {
  unsetenv("TESSERA_API_KEY");
  auto options = Parse({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->api_key, "");
  setenv("TESSERA_API_KEY", "env-key-0123456789abcdef", 1);
  options = Parse({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->api_key, "env-key-0123456789abcdef");
  options = Parse({"--api-key", "flag-key-0123456789abcdef"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->api_key, "flag-key-0123456789abcdef");
  unsetenv("TESSERA_API_KEY");
  EXPECT_FALSE(Parse({"--api-key", ""}).ok());
}

TEST(OptionsTest, ServerComesFromTheEnvironmentUnlessGiven) {
  setenv("TESSERA_SERVER", "example:1", 1);
  EXPECT_EQ(Parse({})->server, "example:1");
  EXPECT_EQ(Parse({"--server", "other:2"})->server, "other:2");
  unsetenv("TESSERA_SERVER");
}

TEST(OptionsTest, ParsesEveryFlagInBothSpellings) {
  const auto options = Parse({"--server=h:9", "--request-rate", "12.5", "--burstiness=0.5",
                              "--max-concurrency", "8", "--duration", "30", "--max-tokens=64",
                              "--ignore-eos", "--temperature", "0.7", "--seed", "99",
                              "--warmup", "0", "--timeout", "5", "--json", "--channels", "4"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->open_loop());
  EXPECT_DOUBLE_EQ(options->ramp_up_seconds, 0.0);
  EXPECT_DOUBLE_EQ(*options->request_rate, 12.5);
  EXPECT_DOUBLE_EQ(options->burstiness, 0.5);
  EXPECT_EQ(options->max_concurrency, 8);
  EXPECT_EQ(options->concurrency, 0);
  EXPECT_DOUBLE_EQ(*options->duration_seconds, 30.0);
  EXPECT_FALSE(options->num_requests.has_value());  // --duration alone: no count limit
  EXPECT_EQ(options->max_tokens, 64);
  EXPECT_TRUE(options->ignore_eos);
  EXPECT_EQ(options->seed, 99u);
  EXPECT_EQ(options->warmup, 0);
  EXPECT_DOUBLE_EQ(options->timeout_seconds, 5.0);
  EXPECT_TRUE(options->json);
  EXPECT_EQ(options->channels, 4);
}

TEST(OptionsTest, DatasetReplacesRandomPrompts) {
  const auto options = Parse({"--dataset", "/tmp/p.jsonl", "--num-requests", "7"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->dataset, "/tmp/p.jsonl");
  EXPECT_EQ(options->num_requests, 7);
}

TEST(OptionsTest, UsageErrorsSayWhatIsWrong) {
  struct Case {
    std::vector<std::string> args;
    const char* want;
  };
  const std::vector<Case> cases = {
      {{"--bogus"}, "unknown option --bogus"},
      {{"stray"}, "unexpected argument 'stray'"},
      {{"--concurrency"}, "--concurrency needs a value"},
      {{"--concurrency", "0"}, "--concurrency: bad value '0'"},
      {{"--concurrency", "many"}, "--concurrency: bad value"},
      {{"--request-rate", "0"}, "--request-rate: bad value"},
      {{"--request-rate", "inf"}, "--request-rate: bad value"},
      {{"--temperature", "nan"}, "--temperature: bad value"},
      {{"--max-tokens", "1.5"}, "--max-tokens: bad value"},
      {{"--seed", "-1"}, "--seed: bad value"},
      {{"--json=yes"}, "--json takes no value"},
      {{"--request-rate", "5", "--concurrency", "4"}, "use --max-concurrency"},
      {{"--burstiness", "2"}, "need --request-rate"},
      {{"--max-concurrency", "2"}, "need --request-rate"},
      {{"--ramp-up", "-1"}, "--ramp-up: bad value"},
      {{"--request-rate", "5", "--ramp-up", "2"}, "--ramp-up is for closed-loop runs"},
      {{"--dataset", "d.jsonl", "--input-len", "4"}, "--input-len applies to random prompts"},
  };
  for (const Case& c : cases) {
    const auto options = Parse(c.args);
    ASSERT_FALSE(options.ok()) << c.args.front();
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(options.status().message().find(c.want), std::string::npos)
        << "got: " << options.status().message() << "\nwant: " << c.want;
  }
}

TEST(OptionsTest, HelpListsEveryFlag) {
  const auto options = Parse({"--help"});
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->help);
  const std::string help = HelpText();
  for (const char* flag :
       {"--server", "--channels", "--concurrency", "--request-rate", "--burstiness",
        "--max-concurrency", "--ramp-up", "--num-requests", "--duration", "--warmup", "--dataset",
        "--input-len", "--seed", "--max-tokens", "--ignore-eos", "--temperature", "--timeout",
        "--json", "--help"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

// --- Aggregation and reports ---

RequestRecord Ok(double ttft, double e2e, std::vector<double> itl, int64_t prompt_tokens) {
  RequestRecord record;
  record.ok = true;
  record.ttft = ttft;
  record.e2e = e2e;
  record.output_tokens = static_cast<int64_t>(itl.size()) + 1;
  record.itl = std::move(itl);
  record.prompt_tokens = prompt_tokens;
  return record;
}

RequestRecord Failed(int code, const std::string& message) {
  RequestRecord record;
  record.status_code = code;
  record.error_message = message;
  return record;
}

std::vector<RequestRecord> SampleRecords() {
  return {Ok(0.1, 0.5, {0.1, 0.1, 0.2}, 10), Ok(0.3, 0.6, {0.3}, 10),
          Failed(8, "queue is full"), Failed(8, "queue is full"), Failed(4, "deadline")};
}

TEST(AggregateTest, CountsTokensAndLatenciesOfCompletedRequests) {
  const BenchResult result = Aggregate(SampleRecords(), 2.0);
  EXPECT_EQ(result.completed, 2);
  EXPECT_EQ(result.failed, 3);
  EXPECT_EQ(result.input_tokens, 20);
  EXPECT_EQ(result.output_tokens, 6);
  EXPECT_DOUBLE_EQ(result.RequestThroughput(), 1.0);
  EXPECT_DOUBLE_EQ(result.OutputTokensPerSecond(), 3.0);
  EXPECT_DOUBLE_EQ(result.TotalTokensPerSecond(), 13.0);
  EXPECT_DOUBLE_EQ(result.ttft.mean, 0.2);
  EXPECT_DOUBLE_EQ(result.e2e.p50, 0.55);
  EXPECT_EQ(result.itl.count, 4);
  EXPECT_DOUBLE_EQ(result.tpot.mean, (0.4 / 3 + 0.3) / 2);
  EXPECT_EQ(result.errors.at("RESOURCE_EXHAUSTED"), 2);
  EXPECT_EQ(result.errors.at("DEADLINE_EXCEEDED"), 1);
}

TEST(AggregateTest, NothingCompletedGivesZerosNotNan) {
  const BenchResult result = Aggregate({}, 0.0);
  EXPECT_EQ(result.RequestThroughput(), 0.0);
  EXPECT_EQ(result.OutputTokensPerSecond(), 0.0);
  EXPECT_EQ(result.ttft.p99, 0.0);
}

TEST(ReportTest, JsonHasResultsAndConfiguration) {
  Options options = *Parse({"--concurrency", "4", "--num-requests", "5", "--max-tokens", "3"});
  const nlohmann::json json =
      ToJson(Aggregate(SampleRecords(), 2.0), options, {"stories260K", "h:1"});
  EXPECT_EQ(json["completed"], 2);
  EXPECT_EQ(json["failed"], 3);
  EXPECT_DOUBLE_EQ(json["duration_seconds"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(json["request_throughput"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(json["output_tokens_per_second"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(json["total_tokens_per_second"].get<double>(), 13.0);
  for (const char* key : {"ttft_seconds", "tpot_seconds", "itl_seconds", "e2e_seconds"}) {
    ASSERT_TRUE(json[key].is_object()) << key;
    for (const char* stat : {"mean", "p50", "p90", "p99"}) {
      EXPECT_TRUE(json[key][stat].is_number()) << key << "." << stat;
    }
    EXPECT_LE(json[key]["p50"].get<double>(), json[key]["p99"].get<double>()) << key;
  }
  EXPECT_EQ(json["errors"], (nlohmann::json{{"RESOURCE_EXHAUSTED", 2}, {"DEADLINE_EXCEEDED", 1}}));
  EXPECT_EQ(json["concurrency"], 4);
  EXPECT_DOUBLE_EQ(json["ramp_up_seconds"].get<double>(), 0.0);
  EXPECT_TRUE(json["request_rate"].is_null());
  EXPECT_DOUBLE_EQ(json["burstiness"].get<double>(), 1.0);
  EXPECT_EQ(json["num_requests"], 5);
  EXPECT_EQ(json["input_len"], 128);
  EXPECT_EQ(json["max_tokens"], 3);
  EXPECT_EQ(json["model"], "stories260K");
}

TEST(ReportTest, JsonOfAnOpenLoopRun) {
  Options options = *Parse({"--request-rate", "50", "--duration", "3", "--dataset", "d"});
  const nlohmann::json json = ToJson(Aggregate({}, 0.0), options, {"m", "h:1"});
  EXPECT_TRUE(json["concurrency"].is_null());
  EXPECT_DOUBLE_EQ(json["request_rate"].get<double>(), 50.0);
  EXPECT_TRUE(json["num_requests"].is_null());
  EXPECT_TRUE(json["input_len"].is_null());
  EXPECT_EQ(json["errors"], nlohmann::json::object());
  EXPECT_EQ(json["ttft_seconds"]["mean"], 0.0);
}

TEST(ReportTest, TableShowsThroughputLatenciesInMsAndErrors) {
  Options options = *Parse({"--concurrency", "4"});
  const std::string table =
      FormatTable(Aggregate(SampleRecords(), 2.0), options, {"stories260K", "h:1"});
  for (const char* want : {"closed loop, concurrency 4", "Requests completed", "Requests failed",
                           "Request throughput (req/s)", "Output tokens/s", "Total tokens/s",
                           "TTFT", "TPOT", "ITL", "E2E", "RESOURCE_EXHAUSTED",
                           "(queue is full)"}) {
    EXPECT_NE(table.find(want), std::string::npos) << want << "\n" << table;
  }
  EXPECT_NE(table.find("200.00"), std::string::npos) << table;  // mean TTFT, 0.2 s
}

TEST(ReportTest, ClosedLoopWithRampUpSaysSo) {
  Options options = *Parse({"--concurrency", "32", "--ramp-up", "2.5"});
  EXPECT_DOUBLE_EQ(options.ramp_up_seconds, 2.5);
  const std::string table = FormatTable(Aggregate(SampleRecords(), 2.0), options, {"m", "h:1"});
  EXPECT_NE(table.find("closed loop, concurrency 32 (ramp-up 2.5 s)"), std::string::npos)
      << table;
  EXPECT_DOUBLE_EQ(ToJson(Aggregate({}, 0.0), options, {"m", "h:1"})["ramp_up_seconds"]
                       .get<double>(), 2.5);
}

TEST(ReportTest, SavedRequestsAreOneLinePerRequestInSendOrder) {
  std::vector<RequestRecord> records = SampleRecords();
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].index = static_cast<int64_t>(i);
    records[i].sent_at = 0.5 * static_cast<double>(records.size() - i);  // sent in reverse
  }
  records[0].server_queue = 0.01;
  records[0].server_ttft = 0.125;
  const std::string text = RecordsJsonLines(records);
  std::vector<nlohmann::json> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    lines.push_back(nlohmann::json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), records.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const RequestRecord& r = records[records.size() - 1 - i];
    EXPECT_EQ(lines[i]["index"], r.index);
    EXPECT_EQ(lines[i]["ok"], r.ok);
    EXPECT_DOUBLE_EQ(lines[i]["sent_at_seconds"].get<double>(), r.sent_at);
    EXPECT_DOUBLE_EQ(lines[i]["ttft_seconds"].get<double>(), r.ttft);
    EXPECT_EQ(lines[i]["output_tokens"], r.output_tokens);
    EXPECT_EQ(lines[i].contains("server_ttft_seconds"), i + 1 == lines.size()) << i;
  }
  EXPECT_DOUBLE_EQ(lines.back()["server_ttft_seconds"].get<double>(), 0.125);
  EXPECT_EQ(lines.front()["status"], "DEADLINE_EXCEEDED");
}

TEST(StatusCodeNameTest, NamesCodes) {
  EXPECT_EQ(StatusCodeName(0), "OK");
  EXPECT_EQ(StatusCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(99), "CODE_99");
}

TEST(ProgressTest, ShowsCountsElapsedAndRate) {
  ProgressSnapshot snapshot;
  snapshot.completed = 30;
  snapshot.failed = 2;
  snapshot.total = 100;
  snapshot.elapsed_seconds = 2.0;
  snapshot.tokens_received = 500;
  EXPECT_EQ(FormatProgress(snapshot), "    32/100 done, 2 failed, 2.0 s, 250.0 output tok/s");
  snapshot.total.reset();
  snapshot.duration = 10.0;
  EXPECT_EQ(FormatProgress(snapshot), "    32 done, 2 failed, 2.0/10 s, 250.0 output tok/s");
}

}  // namespace
}  // namespace tessera::bench
