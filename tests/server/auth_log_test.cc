// What the key check logs: refusals with the key's fingerprint, never the
// key, and at most kLogsPerSecond of them a second.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "server/auth/authenticator.h"

namespace tessera::server::auth {
namespace {

constexpr char kAlice[] = "alice-key-0123456789abcdef";
constexpr char kWrong[] = "wrong-key-0123456789abcdef";

class AuthLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
    previous_ = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>("auth-test", sink_);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }
  std::vector<std::string> Lines() { return sink_->last_formatted(); }

  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
  Authenticator auth_{std::make_shared<KeyStore>(std::vector<ApiKey>{{"alice", kAlice}}, ""),
                      nullptr};
};

TEST_F(AuthLogTest, LogsNamesAndFingerprintsNeverKeys) {
  const std::string wrong_bearer = std::string("Bearer ") + kWrong;
  const std::string alice_bearer = std::string("Bearer ") + kAlice;
  EXPECT_FALSE(auth_.Check({wrong_bearer, std::nullopt}, Front::kHttp, "/v1/models").ok());
  absl::StatusOr<std::string> name = auth_.Check({alice_bearer, std::nullopt}, Front::kGrpc, "/m");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(*name, "alice");
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("http /v1/models: refused (invalid_key, fingerprint " +
                          Fingerprint(kWrong) + ")"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("key 'alice'"), std::string::npos) << lines[1];
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find(kWrong), std::string::npos) << line;
    EXPECT_EQ(line.find(kAlice), std::string::npos) << line;
  }
}

TEST_F(AuthLogTest, AFloodOfRefusalsIsLoggedAtARate) {
  for (int i = 0; i < 5 * kLogsPerSecond; ++i) {
    absl::StatusOr<std::string> refused = auth_.Check({}, Front::kGrpc, "/m");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(Authenticator::RefusalOf(refused.status()), Refusal::kMissingKey);
  }
  // All within one second (or, on a very slow machine, a few).
  const size_t logged = Lines().size();
  EXPECT_GE(logged, static_cast<size_t>(kLogsPerSecond));
  EXPECT_LT(logged, static_cast<size_t>(5 * kLogsPerSecond));
}

}  // namespace
}  // namespace tessera::server::auth
