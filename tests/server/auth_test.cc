// API keys on a running server: every method of tessera.v1.Inference (taken
// from its descriptor, so a method added later is covered) refuses calls
// without a valid key; health is open unless --auth-health; reflection
// needs a key; the HTTP front answers 401; refusals are counted; a reload
// swaps the keys on both fronts.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <nlohmann/json.hpp>

#include "server/auth/key_store.h"
#include "server/auth_test_util.h"
#include "server/test_util.h"

namespace tessera::server::testing {
namespace {

constexpr char kAlice[] = "alice-key-0123456789abcdef";
constexpr char kBob[] = "bob-secret-key-0123456789";
constexpr char kCarol[] = "carol-new-key-0123456789";

class AuthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/tessera-auth-keys-XXXXXX";
    const int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    close(fd);
    key_file_ = name;
    WriteKeys(std::string("# test keys\nalice:") + kAlice + "\n" + kBob + "\n");
  }
  void TearDown() override {
    server_.reset();
    std::remove(key_file_.c_str());
  }
  void WriteKeys(const std::string& text) {
    std::ofstream out(key_file_, std::ios::binary | std::ios::trunc);
    out << text;
  }
  void Start(bool auth_health = false) {
    ServerOptions options = TestOptions();
    options.http_port = kAnyFreePort;
    options.api_key_file = key_file_;
    options.auth_health = auth_health;
    server_ = StartServer(options);
    channel_ = Connect(server_->port());
  }
  int Http(const std::string& method, const std::string& path,
           const std::vector<std::string>& headers, const std::string& body = "") {
    return HttpRequest(server_->http_port(), method, path, headers, body).status;
  }

  std::string key_file_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(AuthServerTest, EveryInferenceMethodNeedsAKey) {
  Start();
  const google::protobuf::ServiceDescriptor* service =
      v1::GenerateRequest::descriptor()->file()->FindServiceByName("Inference");
  ASSERT_NE(service, nullptr);
  ASSERT_GE(service->method_count(), 8);
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method = "/" + service->full_name() + "/" + service->method(i)->name();
    SCOPED_TRACE(method);
    EXPECT_EQ(CallEmpty(channel_, method, {}).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(CallEmpty(channel_, method, Bearer(std::string(kAlice) + "x")).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(CallEmpty(channel_, method, {{"authorization", std::string("Basic ") + kAlice}})
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    // With a key the call reaches the service (an empty request may be
    // refused there, but not for its key).
    EXPECT_NE(CallEmpty(channel_, method, Bearer(kAlice)).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_NE(CallEmpty(channel_, method, {{"x-api-key", kBob}}).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  // A method no service has is refused for its key first.
  EXPECT_EQ(CallEmpty(channel_, "/tessera.v1.Inference/NoSuchMethod", {}).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallEmpty(channel_, "/tessera.v1.Inference/NoSuchMethod", Bearer(kAlice)).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(AuthServerTest, KeyedGenerationWorks) {
  Start();
  auto stub = v1::Inference::NewStub(channel_);
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("bearer ") + kAlice);  // any case
  v1::CompleteResponse response;
  grpc::Status status = stub->Complete(&context, TextRequest("Once upon a time", 5), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.token_ids_size(), 5);
}

TEST_F(AuthServerTest, HealthOpenReflectionKeyed) {
  Start();
  EXPECT_EQ(HealthStatus(channel_, ""), kServing);
  EXPECT_EQ(HealthStatus(channel_, "tessera.v1.Inference"), kServing);
  const std::string reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  EXPECT_EQ(CallEmpty(channel_, reflection, {}).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(CallEmpty(channel_, reflection, Bearer(kAlice)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthServerTest, AuthHealthClosesHealth) {
  Start(/*auth_health=*/true);
  EXPECT_EQ(CallEmpty(channel_, "/grpc.health.v1.Health/Check", {}).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(CallEmpty(channel_, "/grpc.health.v1.Health/Check", Bearer(kAlice)).ok());
  EXPECT_EQ(Http("GET", "/health", {}), 401);
  EXPECT_EQ(Http("GET", "/health", {std::string("Authorization: Bearer ") + kAlice}), 200);
}

TEST_F(AuthServerTest, HttpRoutesNeedAKey) {
  Start();
  const std::string alice = std::string("Authorization: Bearer ") + kAlice;
  HttpResponse refused = HttpRequest(server_->http_port(), "GET", "/v1/models", {});
  EXPECT_EQ(refused.status, 401);
  EXPECT_NE(refused.head.find("WWW-Authenticate: Bearer"), std::string::npos) << refused.head;
  nlohmann::json body = nlohmann::json::parse(refused.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << refused.body;
  EXPECT_EQ(body["error"]["code"], "invalid_api_key");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"]["message"].is_string());

  const std::string completion = R"({"model":"llama","prompt":"Once","max_tokens":2})";
  for (const char* path : {"/v1/models", "/metrics", "/no-such-route"}) {
    EXPECT_EQ(Http("GET", path, {}), 401) << path;
    EXPECT_EQ(Http("GET", path, {std::string("Authorization: Bearer ") + kBob + "x"}), 401) << path;
  }
  EXPECT_EQ(Http("POST", "/v1/completions", {}, completion), 401);
  EXPECT_EQ(Http("POST", "/v1/chat/completions", {}, "{}"), 401);
  EXPECT_EQ(Http("POST", "/apply-template", {}, "{}"), 401);
  EXPECT_EQ(Http("GET", "/health", {}), 200);

  EXPECT_EQ(Http("GET", "/v1/models", {alice}), 200);
  EXPECT_EQ(Http("GET", "/v1/models", {std::string("X-Api-Key: ") + kBob}), 200);
  EXPECT_EQ(Http("GET", "/no-such-route", {alice}), 404);
  HttpResponse done = HttpRequest(server_->http_port(), "POST", "/v1/completions", {alice}, completion);
  EXPECT_EQ(done.status, 200) << done.body;
}

TEST_F(AuthServerTest, RefusalsAreCountedByFrontAndReason) {
  Start();
  CallEmpty(channel_, "/tessera.v1.Inference/GetModelInfo", {});
  CallEmpty(channel_, "/tessera.v1.Inference/GetModelInfo", {});
  CallEmpty(channel_, "/tessera.v1.Inference/GetModelInfo", Bearer("wrong-key-0123456789abc"));
  Http("GET", "/v1/models", {"Authorization: Token abc"});
  const std::string scrape = server_->metrics().Scrape();
  EXPECT_NE(scrape.find(R"(tessera_auth_failures_total{front="grpc",reason="missing_key"} 2)"),
            std::string::npos) << scrape;
  EXPECT_NE(scrape.find(R"(tessera_auth_failures_total{front="grpc",reason="invalid_key"} 1)"),
            std::string::npos);
  EXPECT_NE(scrape.find(R"(tessera_auth_failures_total{front="http",reason="malformed_header"} 1)"),
            std::string::npos);
  EXPECT_NE(scrape.find(R"(tessera_request_failure_total{code="UNAUTHENTICATED"} 4)"),
            std::string::npos);
}

TEST_F(AuthServerTest, ReloadSwapsKeysOnBothFronts) {
  Start();
  ASSERT_NE(server_->key_store(), nullptr);
  WriteKeys(std::string("carol:") + kCarol + "\n");
  ASSERT_TRUE(server_->key_store()->Reload().ok());
  const std::string info = "/tessera.v1.Inference/GetModelInfo";
  EXPECT_TRUE(CallEmpty(channel_, info, Bearer(kCarol)).ok());
  EXPECT_EQ(CallEmpty(channel_, info, Bearer(kAlice)).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Http("GET", "/v1/models", {std::string("Authorization: Bearer ") + kCarol}), 200);
  EXPECT_EQ(Http("GET", "/v1/models", {std::string("Authorization: Bearer ") + kAlice}), 401);
  // A bad file keeps carol's key.
  WriteKeys("carol:short\n");
  EXPECT_FALSE(server_->key_store()->Reload().ok());
  EXPECT_TRUE(CallEmpty(channel_, info, Bearer(kCarol)).ok());
}

TEST_F(AuthServerTest, BadKeyFileFailsStart) {
  WriteKeys("alice:short\n");
  ServerOptions options = TestOptions();
  options.api_key_file = key_file_;
  Server server;
  absl::Status status = server.Start(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(":1:"), absl::string_view::npos) << status;
}

TEST(NoKeysTest, ServerStaysOpenWithoutAKeyFile) {
  auto server = StartServer();
  EXPECT_EQ(server->key_store(), nullptr);
  EXPECT_TRUE(CallEmpty(Connect(server->port()), "/tessera.v1.Inference/GetModelInfo", {}).ok());
}

}  // namespace
}  // namespace tessera::server::testing
