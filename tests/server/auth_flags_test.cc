// The API key flags of tessera-server, from the command line and the
// environment.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/flags.h"

namespace tessera::server {
namespace {

absl::StatusOr<ParsedFlags> Parse(std::vector<std::string> args,
                                  const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), "tessera-server");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseFlags(static_cast<int>(argv.size()), argv.data(),
                    [&env](const std::string& name) -> std::optional<std::string> {
                      auto it = env.find(name);
                      if (it == env.end()) return std::nullopt;
                      return it->second;
                    });
}

TEST(AuthFlagsTest, OffByDefault) {
  absl::StatusOr<ParsedFlags> parsed = Parse({"--model", "m.gguf"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->options.api_key_file, "");
  EXPECT_FALSE(parsed->options.auth_health);
  EXPECT_EQ(parsed->options.max_queued_requests_per_key, 0);
}

TEST(AuthFlagsTest, FromTheCommandLine) {
  absl::StatusOr<ParsedFlags> parsed =
      Parse({"--model", "m.gguf", "--api-key-file", "/etc/keys.txt", "--auth-health",
             "--max-queued-requests-per-key=4"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->options.api_key_file, "/etc/keys.txt");
  EXPECT_TRUE(parsed->options.auth_health);
  EXPECT_EQ(parsed->options.max_queued_requests_per_key, 4);
}

TEST(AuthFlagsTest, FromTheEnvironment) {
  absl::StatusOr<ParsedFlags> parsed =
      Parse({"--model", "m.gguf"}, {{"TESSERA_API_KEY_FILE", "/run/keys"},
                                    {"TESSERA_AUTH_HEALTH", "1"},
                                    {"TESSERA_MAX_QUEUED_REQUESTS_PER_KEY", "2"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->options.api_key_file, "/run/keys");
  EXPECT_TRUE(parsed->options.auth_health);
  EXPECT_EQ(parsed->options.max_queued_requests_per_key, 2);
}

TEST(AuthFlagsTest, BadValuesNameTheFlag) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--api-key-file", ""},
        std::vector<std::string>{"--max-queued-requests-per-key", "-1"},
        std::vector<std::string>{"--max-queued-requests-per-key", "x"},
        std::vector<std::string>{"--auth-health=1"}}) {
    std::vector<std::string> full = {"--model", "m.gguf"};
    full.insert(full.end(), args.begin(), args.end());
    absl::StatusOr<ParsedFlags> parsed = Parse(full);
    ASSERT_FALSE(parsed.ok()) << args[0];
    EXPECT_NE(parsed.status().message().find(args[0].substr(0, args[0].find('='))),
              absl::string_view::npos)
        << parsed.status();
  }
}

TEST(AuthFlagsTest, HelpListsThem) {
  const std::string help = FlagsHelp("tessera-server");
  for (const char* name : {"--api-key-file FILE", "--auth-health", "--max-queued-requests-per-key N",
                           "TESSERA_API_KEY_FILE"}) {
    EXPECT_NE(help.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace tessera::server
