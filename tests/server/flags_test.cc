// tessera-server's flag and environment parsing.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/flags.h"

namespace tessera::server {
namespace {

using ::testing::HasSubstr;

class FlagsTest : public ::testing::Test {
 protected:
  absl::StatusOr<ParsedFlags> Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "tessera-server");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    return ParseFlags(static_cast<int>(argv.size()), argv.data(),
                      [this](const std::string& name) -> std::optional<std::string> {
                        auto it = env_.find(name);
                        if (it == env_.end()) return std::nullopt;
                        return it->second;
                      });
  }

  std::map<std::string, std::string> env_;
};

TEST_F(FlagsTest, DefaultsNeedOnlyTheModel) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"--model", "m.gguf"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ServerOptions& o = parsed->options;
  EXPECT_EQ(o.engine.model_path, "m.gguf");
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 50051);
  EXPECT_EQ(o.metrics_port, 9090);
  EXPECT_EQ(o.engine.device, "auto");
  EXPECT_EQ(o.engine.num_threads, 0);
  EXPECT_EQ(o.drain_timeout, std::chrono::seconds(30));
  EXPECT_EQ(o.log_level, "info");
  EXPECT_FLOAT_EQ(o.engine.gpu_memory_utilization, 0.9f);
  EXPECT_EQ(o.engine.dtype, "auto");
  EXPECT_FALSE(parsed->help);
}

TEST_F(FlagsTest, EveryFlagIsParsed) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"--model=x.gguf",
                                              "--host",
                                              "127.0.0.1",
                                              "--port",
                                              "0",
                                              "--metrics-port=0",
                                              "--device",
                                              "cpu",
                                              "--threads",
                                              "3",
                                              "--max-queued-requests",
                                              "7",
                                              "--max-num-seqs",
                                              "5",
                                              "--max-batched-tokens",
                                              "512",
                                              "--kv-cache-memory",
                                              "64M",
                                              "--block-size",
                                              "32",
                                              "--drain-timeout",
                                              "2.5",
                                              "--log-level",
                                              "debug",
                                              "--gpu-memory-utilization",
                                              "0.5",
                                              "--dtype",
                                              "bf16"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ServerOptions& o = parsed->options;
  EXPECT_EQ(o.engine.model_path, "x.gguf");
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 0);
  EXPECT_EQ(o.metrics_port, 0);
  EXPECT_EQ(o.engine.device, "cpu");
  EXPECT_EQ(o.engine.num_threads, 3);
  EXPECT_EQ(o.engine.max_queued_requests, 7);
  EXPECT_EQ(o.engine.max_num_seqs, 5);
  EXPECT_EQ(o.engine.max_batched_tokens, 512);
  EXPECT_EQ(o.engine.kv_cache_bytes, int64_t{64} << 20);
  EXPECT_EQ(o.engine.block_size, 32);
  EXPECT_EQ(o.drain_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(o.log_level, "debug");
  EXPECT_FLOAT_EQ(o.engine.gpu_memory_utilization, 0.5f);
  EXPECT_EQ(o.engine.dtype, "bf16");
}

TEST_F(FlagsTest, EnvironmentIsUsedAndCommandLineWins) {
  env_ = {{"TESSERA_MODEL", "env.gguf"},
          {"TESSERA_PORT", "6000"},
          {"TESSERA_MAX_NUM_SEQS", "9"},
          {"TESSERA_KV_CACHE_MEMORY", "1GiB"}};
  absl::StatusOr<ParsedFlags> parsed = Parse({"--port", "7000"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->options.engine.model_path, "env.gguf");
  EXPECT_EQ(parsed->options.port, 7000);
  EXPECT_EQ(parsed->options.engine.max_num_seqs, 9);
  EXPECT_EQ(parsed->options.engine.kv_cache_bytes, int64_t{1} << 30);
}

TEST_F(FlagsTest, InvalidValuesAreRejectedWithTheFlagName) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--model", "m", "--port", "-1"}, "--port"},
      {{"--model", "m", "--port", "65536"}, "--port"},
      {{"--model", "m", "--port", "abc"}, "--port"},
      {{"--model", "m", "--metrics-port", "-5"}, "--metrics-port"},
      {{"--model", "m", "--device", "tpu"}, "--device"},
      {{"--model", "m", "--threads", "-1"}, "--threads"},
      {{"--model", "m", "--max-num-seqs", "0"}, "--max-num-seqs"},
      {{"--model", "m", "--kv-cache-memory", "lots"}, "--kv-cache-memory"},
      {{"--model", "m", "--drain-timeout", "-1"}, "--drain-timeout"},
      {{"--model", "m", "--drain-timeout", "nan"}, "--drain-timeout"},
      {{"--model", "m", "--log-level", "loud"}, "--log-level"},
      {{"--model", "m", "--gpu-memory-utilization", "0"}, "--gpu-memory-utilization"},
      {{"--model", "m", "--gpu-memory-utilization", "1.5"}, "--gpu-memory-utilization"},
      {{"--model", "m", "--gpu-memory-utilization", "nan"}, "--gpu-memory-utilization"},
      {{"--model", "m", "--dtype", "f8"}, "--dtype"},
      {{"--model", "m", "--bogus", "1"}, "--bogus"},
      {{"--model", "m", "stray"}, "stray"},
      {{"--model"}, "--model"},
      {{}, "--model"},
  };
  for (const auto& [args, expected] : cases) {
    absl::StatusOr<ParsedFlags> parsed = Parse(args);
    ASSERT_FALSE(parsed.ok()) << expected;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(expected));
  }
  env_ = {{"TESSERA_PORT", "x"}};
  absl::StatusOr<ParsedFlags> parsed = Parse({"--model", "m"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("TESSERA_PORT"));
}

TEST_F(FlagsTest, PrefixCachingAndScheduling) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"--model", "m"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->options.engine.enable_prefix_caching);
  EXPECT_EQ(parsed->options.engine.scheduling_policy, "fcfs");
  EXPECT_DOUBLE_EQ(parsed->options.engine.priority_aging_seconds, 10.0);
  parsed = Parse({"--model", "m", "--no-prefix-caching", "--scheduling-policy", "priority",
                  "--priority-aging-seconds=2.5"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->options.engine.enable_prefix_caching);
  EXPECT_EQ(parsed->options.engine.scheduling_policy, "priority");
  EXPECT_DOUBLE_EQ(parsed->options.engine.priority_aging_seconds, 2.5);
  // The switch takes no value: what follows is the next flag.
  parsed = Parse({"--no-prefix-caching", "--model", "m"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->options.engine.enable_prefix_caching);
  for (const auto& [value, on] : std::vector<std::pair<std::string, bool>>{
           {"1", false}, {"true", false}, {"TRUE", false}, {"0", true}, {"false", true}}) {
    env_ = {{"TESSERA_NO_PREFIX_CACHING", value}, {"TESSERA_SCHEDULING_POLICY", "priority"}};
    parsed = Parse({"--model", "m"});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->options.engine.enable_prefix_caching, on) << value;
    EXPECT_EQ(parsed->options.engine.scheduling_policy, "priority");
  }
  env_ = {{"TESSERA_NO_PREFIX_CACHING", "maybe"}};
  parsed = Parse({"--model", "m"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("TESSERA_NO_PREFIX_CACHING"));
  env_.clear();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--model", "m", "--no-prefix-caching=1"},
        {"--model", "m", "--scheduling-policy", "lottery"},
        {"--model", "m", "--priority-aging-seconds", "-1"},
        {"--model", "m", "--priority-aging-seconds", "inf"}}) {
    parsed = Parse(args);
    ASSERT_FALSE(parsed.ok()) << args[2];
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(args[2].substr(0, 12)));
  }
}

TEST_F(FlagsTest, HelpListsEveryFlag) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"--help"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help);
  const std::string help = FlagsHelp("tessera-server");
  for (const char* flag :
       {"--model", "--host", "--port", "--metrics-port", "--device", "--threads",
        "--max-queued-requests", "--max-num-seqs", "--max-batched-tokens",
        "--prefill-group-tokens", "--kv-cache-memory",
        "--block-size", "--drain-timeout", "--log-level", "--gpu-memory-utilization",
        "--dtype", "--no-prefix-caching", "--scheduling-policy", "--priority-aging-seconds",
        "TESSERA_NO_PREFIX_CACHING", "TESSERA_MAX_NUM_SEQS", "TESSERA_GPU_MEMORY_UTILIZATION"}) {
    EXPECT_THAT(help, HasSubstr(flag));
  }
}

TEST_F(FlagsTest, TlsFlagsAndTheirEnvironment) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"--model", "m.gguf"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->options.tls.enabled());
  EXPECT_EQ(parsed->options.tls.refresh_interval, std::chrono::seconds(60));
  env_["TESSERA_TLS_KEY"] = "/k.pem";
  parsed = Parse({"--model", "m.gguf", "--tls-cert", "/c.pem", "--tls-client-ca=/ca.pem",
                  "--tls-refresh-interval", "5"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const tls::TlsOptions& t = parsed->options.tls;
  EXPECT_TRUE(t.enabled());
  EXPECT_EQ(t.cert_path, "/c.pem");
  EXPECT_EQ(t.key_path, "/k.pem");
  EXPECT_EQ(t.client_ca_path, "/ca.pem");
  EXPECT_EQ(t.refresh_interval, std::chrono::seconds(5));
  // A client CA alone still turns TLS on, so that the server refuses to start.
  env_.clear();
  parsed = Parse({"--model", "m.gguf", "--tls-client-ca", "/ca.pem"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->options.tls.enabled());
  for (const char* bad : {"0", "-1", "1.5", "x", "86401"}) {
    EXPECT_THAT(Parse({"--model", "m.gguf", "--tls-refresh-interval", bad}).status().message(),
                HasSubstr("--tls-refresh-interval")) << bad;
  }
  EXPECT_FALSE(Parse({"--model", "m.gguf", "--tls-cert", ""}).ok());
}

TEST_F(FlagsTest, GrpcLimitsDefaultsFlagsAndEnvironment) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"--model", "m.gguf"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const GrpcLimits defaults = parsed->options.grpc;
  EXPECT_EQ(defaults.max_concurrent_streams, 256);
  EXPECT_EQ(defaults.max_connection_idle.count(), 0);
  EXPECT_EQ(defaults.max_connection_age.count(), 0);
  EXPECT_EQ(defaults.max_connection_age_grace.count(), 0);
  EXPECT_EQ(defaults.keepalive_time, std::chrono::seconds(60));
  EXPECT_EQ(defaults.keepalive_timeout, std::chrono::seconds(20));
  EXPECT_EQ(defaults.keepalive_min_client_interval, std::chrono::seconds(10));
  EXPECT_EQ(defaults.max_threads, 64);
  EXPECT_EQ(defaults.memory_quota, 0);

  env_ = {{"TESSERA_MAX_CONNECTION_AGE", "300"},
          {"TESSERA_GRPC_MEMORY_QUOTA", "512M"},
          {"TESSERA_KEEPALIVE_TIME", "1"}};
  parsed = Parse({"--model", "m.gguf", "--max-concurrent-streams", "2",
                  "--max-connection-idle=1.5", "--max-connection-age-grace", "30",
                  "--keepalive-time", "7", "--keepalive-timeout", "0.25",
                  "--keepalive-min-client-interval", "0", "--grpc-max-threads", "2"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const GrpcLimits& g = parsed->options.grpc;
  EXPECT_EQ(g.max_concurrent_streams, 2);
  EXPECT_EQ(g.max_connection_idle, std::chrono::milliseconds(1500));
  EXPECT_EQ(g.max_connection_age, std::chrono::seconds(300));
  EXPECT_EQ(g.max_connection_age_grace, std::chrono::seconds(30));
  EXPECT_EQ(g.keepalive_time, std::chrono::seconds(7));  // the command line wins
  EXPECT_EQ(g.keepalive_timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(g.keepalive_min_client_interval.count(), 0);
  EXPECT_EQ(g.max_threads, 2);
  EXPECT_EQ(g.memory_quota, int64_t{512} << 20);
  env_.clear();
  parsed = Parse({"--model", "m.gguf", "--max-concurrent-streams", "0", "--grpc-max-threads",
                  "0", "--grpc-memory-quota", "1048576"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->options.grpc.max_concurrent_streams, 0);
  EXPECT_EQ(parsed->options.grpc.max_threads, 0);
  EXPECT_EQ(parsed->options.grpc.memory_quota, int64_t{1} << 20);
}

TEST_F(FlagsTest, BadGrpcLimitsAreRejectedWithTheFlagName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--max-concurrent-streams", "-1"},
      {"--max-concurrent-streams", "1000001"},
      {"--max-concurrent-streams", "many"},
      {"--max-connection-idle", "-1"},
      {"--max-connection-idle", "86401"},
      {"--max-connection-idle", "1s"},
      {"--max-connection-age", "nan"},
      {"--max-connection-age", "-0.5"},
      {"--max-connection-age-grace", "inf"},
      {"--keepalive-time", "-3"},
      {"--keepalive-timeout", "0"},
      {"--keepalive-timeout", "1e9"},
      {"--keepalive-min-client-interval", "-1"},
      {"--grpc-max-threads", "-1"},
      {"--grpc-max-threads", "1"},
      {"--grpc-max-threads", "100001"},
      {"--grpc-memory-quota", "-1"},
      {"--grpc-memory-quota", "1000"},
      {"--grpc-memory-quota", "lots"},
      {"--grpc-memory-quota", "99999999999T"},
  };
  for (const auto& [flag, value] : cases) {
    absl::StatusOr<ParsedFlags> parsed = Parse({"--model", "m", flag, value});
    ASSERT_FALSE(parsed.ok()) << flag << " " << value;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(flag)) << value;
  }
  env_ = {{"TESSERA_GRPC_MAX_THREADS", "1"}};
  absl::StatusOr<ParsedFlags> parsed = Parse({"--model", "m"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("TESSERA_GRPC_MAX_THREADS"));
  const std::string help = FlagsHelp("tessera-server");
  for (const char* name :
       {"--max-concurrent-streams", "--max-connection-idle", "--max-connection-age",
        "--max-connection-age-grace", "--keepalive-time", "--keepalive-timeout",
        "--keepalive-min-client-interval", "--grpc-max-threads", "--grpc-memory-quota",
        "TESSERA_MAX_CONNECTION_AGE_GRACE", "TESSERA_KEEPALIVE_MIN_CLIENT_INTERVAL"}) {
    EXPECT_THAT(help, HasSubstr(name));
  }
}

}  // namespace
}  // namespace tessera::server
