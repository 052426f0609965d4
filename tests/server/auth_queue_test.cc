// --max-queued-requests-per-key on a running server: with one sequence per
// step, a long request runs and the next ones queue; a key at its cap gets
// RESOURCE_EXHAUSTED (HTTP 429) while another key is still admitted, and a
// queued request that is cancelled or times out gives its place back.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/auth_test_util.h"
#include "server/test_util.h"

namespace tessera::server::testing {
namespace {

constexpr char kAlice[] = "alice-key-0123456789abcdef";
constexpr char kBob[] = "bob-secret-key-0123456789";

// A streaming Generate of `key`, started at once.
struct Stream {
  Stream(v1::Inference::Stub& stub, const std::string& key, int max_tokens) {
    context.AddMetadata("authorization", "Bearer " + key);
    context.set_deadline(In(std::chrono::seconds(120)));
    v1::GenerateRequest request = TextRequest("Once upon a time", max_tokens);
    request.mutable_stopping()->set_ignore_eos(true);
    reader = stub.Generate(&context, request);
  }
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
};

grpc::StatusCode CompleteCode(v1::Inference::Stub& stub, const std::string& key,
                              std::chrono::milliseconds deadline) {
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + key);
  context.set_deadline(In(deadline));
  v1::CompleteResponse response;
  return stub.Complete(&context, TextRequest("Hi", 4), &response).error_code();
}

// Whether `key` is admitted again within a few seconds (the server releases
// a place just after the client sees its call end): a short call then ends
// by its deadline in the queue, not with RESOURCE_EXHAUSTED.
bool AdmittedAgain(v1::Inference::Stub& stub, const std::string& key) {
  for (int i = 0; i < 100; ++i) {
    const grpc::StatusCode code = CompleteCode(stub, key, std::chrono::milliseconds(200));
    if (code == grpc::StatusCode::DEADLINE_EXCEEDED) return true;
    if (code != grpc::StatusCode::RESOURCE_EXHAUSTED) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool WaitWaiting(v1::Inference::Stub& stub, int waiting) {
  for (int i = 0; i < 500; ++i) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kBob);
    v1::GetModelInfoResponse info;
    if (stub.GetModelInfo(&context, {}, &info).ok() && info.requests_waiting() == waiting) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A key file naming alice and bob; empty on failure.
std::string WriteKeyFile() {
  char name[] = "/tmp/tessera-queue-keys-XXXXXX";
  const int fd = mkstemp(name);
  if (fd < 0) return "";
  close(fd);
  std::ofstream(name) << "alice:" << kAlice << "\nbob:" << kBob << "\n";
  return name;
}

// One sequence per step on the slow model, so that requests queue; the
// HTTP front on; `cap` queued requests per key.
ServerOptions QueueOptions(const std::string& key_file, int cap) {
  ServerOptions options = TestOptions();
  options.engine.model_path = SlowModelPath();
  options.engine.kv_cache_bytes = int64_t{256} << 20;
  options.engine.max_num_seqs = 1;
  options.http_port = kAnyFreePort;
  options.api_key_file = key_file;
  options.max_queued_requests_per_key = cap;
  return options;
}

TEST(AuthQueueTest, CapsQueuedRequestsPerKey) {
  const std::string key_file = WriteKeyFile();
  ASSERT_FALSE(key_file.empty());
  std::unique_ptr<Server> server = StartServer(QueueOptions(key_file, 1));
  auto stub = v1::Inference::NewStub(Connect(server->port()));

  // Alice's first request runs (its first token has come: no longer queued).
  Stream running(*stub, kAlice, 4000);
  v1::GenerateResponse first;
  ASSERT_TRUE(running.reader->Read(&first));
  // Her second queues behind it and fills her cap.
  Stream queued(*stub, kAlice, 8);
  ASSERT_TRUE(WaitWaiting(*stub, 1));
  EXPECT_EQ(CompleteCode(*stub, kAlice, std::chrono::seconds(5)),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext info_context;
  info_context.AddMetadata("authorization", std::string("Bearer ") + kBob);
  v1::GetModelInfoResponse info;
  ASSERT_TRUE(stub->GetModelInfo(&info_context, {}, &info).ok());
  const nlohmann::json body = {{"model", info.model_name()}, {"prompt", "Once"}, {"max_tokens", 2}};
  HttpResponse http = HttpRequest(server->http_port(), "POST", "/v1/completions",
                                  {std::string("Authorization: Bearer ") + kAlice}, body.dump());
  EXPECT_EQ(http.status, 429) << http.body;
  EXPECT_NE(http.body.find("max-queued-requests-per-key"), std::string::npos) << http.body;

  // Bob is admitted (and queues) while Alice is at her cap; his request
  // leaving by its deadline gives his place back.
  EXPECT_EQ(CompleteCode(*stub, kBob, std::chrono::milliseconds(300)),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(AdmittedAgain(*stub, kBob));

  // Cancelling Alice's queued request gives her place back.
  queued.context.TryCancel();
  v1::GenerateResponse ignored;
  while (queued.reader->Read(&ignored)) {
  }
  EXPECT_EQ(queued.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(AdmittedAgain(*stub, kAlice));

  running.context.TryCancel();
  while (running.reader->Read(&ignored)) {
  }
  running.reader->Finish();
  server.reset();
  std::remove(key_file.c_str());
}

// An HTTP request with more choices (n) than its key has room for is refused
// before the engine sees any of them: the key's places are free again when
// the 429 arrives, not one engine step later. More choices than the cap
// itself can never be queued: 400.
TEST(AuthQueueTest, RefusedChoicesFreeTheirKeysPlacesAtOnce) {
  const std::string key_file = WriteKeyFile();
  ASSERT_FALSE(key_file.empty());
  std::unique_ptr<Server> server = StartServer(QueueOptions(key_file, 3));
  auto stub = v1::Inference::NewStub(Connect(server->port()));

  // Bob's request runs, so that Alice's wait in the queue; one of hers
  // queues, leaving her room for 2.
  Stream running(*stub, kBob, 4000);
  v1::GenerateResponse first;
  ASSERT_TRUE(running.reader->Read(&first));
  Stream queued(*stub, kAlice, 8);
  ASSERT_TRUE(WaitWaiting(*stub, 1));
  grpc::ClientContext info_context;
  info_context.AddMetadata("authorization", std::string("Bearer ") + kBob);
  v1::GetModelInfoResponse info;
  ASSERT_TRUE(stub->GetModelInfo(&info_context, {}, &info).ok());
  auto choices = [&](int n) {
    const nlohmann::json body = {
        {"model", info.model_name()}, {"prompt", "Once"}, {"max_tokens", 1}, {"n", n}};
    return HttpRequest(server->http_port(), "POST", "/v1/completions",
                       {std::string("Authorization: Bearer ") + kAlice}, body.dump());
  };
  for (int attempt = 0; attempt < 5; ++attempt) {
    HttpResponse http = choices(3);
    ASSERT_EQ(http.status, 429) << http.body;
    // At once: admitted (it then waits behind Bob's and ends by its deadline).
    EXPECT_EQ(CompleteCode(*stub, kAlice, std::chrono::milliseconds(200)),
              grpc::StatusCode::DEADLINE_EXCEEDED)
        << "attempt " << attempt;
  }
  HttpResponse too_many = choices(4);
  EXPECT_EQ(too_many.status, 400) << too_many.body;
  EXPECT_NE(too_many.body.find("--max-queued-requests-per-key"), std::string::npos)
      << too_many.body;

  v1::GenerateResponse ignored;
  for (Stream* stream : {&queued, &running}) {
    stream->context.TryCancel();
    while (stream->reader->Read(&ignored)) {
    }
    stream->reader->Finish();
  }
  server.reset();
  std::remove(key_file.c_str());
}

TEST(AuthQueueTest, CapNeedsKeys) {
  ServerOptions options = TestOptions();
  options.max_queued_requests_per_key = 2;
  Server server;
  EXPECT_EQ(server.Start(options).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::server::testing
