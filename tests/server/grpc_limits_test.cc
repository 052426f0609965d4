// The gRPC port's connection limits (server/grpc_limits.h), seen from real
// clients over loopback: concurrent streams per connection, idle and maximum
// connection age (GOAWAY), server keepalive pings, ping enforcement, and the
// resource quota.
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/server/test_util.h"

namespace tessera::server {
namespace {

using namespace std::chrono_literals;
using testing::In;
using testing::kServing;
using testing::TextRequest;

constexpr char kWatch[] = "/grpc.health.v1.Health/Watch";
constexpr char kReflection[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
// ServerReflectionRequest{list_services = ""}.
const std::string kListServices("\x3a\x00", 2);

// A channel on a connection of its own: channels to the same address with
// the same arguments otherwise share one.
std::shared_ptr<grpc::Channel> OwnChannel(int port, grpc::ChannelArguments args = {}) {
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

bool Connected(const std::shared_ptr<grpc::Channel>& channel) {
  return channel->WaitForConnected(In(10s));
}

// True when the channel's connection goes away (GOAWAY or close) within
// `timeout`; the channel then goes IDLE or reconnects.
bool LeavesReady(const std::shared_ptr<grpc::Channel>& channel, std::chrono::milliseconds timeout) {
  if (channel->GetState(false) != GRPC_CHANNEL_READY) return true;
  return channel->WaitForStateChange(GRPC_CHANNEL_READY, In(timeout));
}

bool CompleteOk(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Inference::NewStub(channel);
  v1::CompleteResponse response;
  grpc::Status status = testing::Complete(*stub, TextRequest("Once upon a time", 8), &response);
  EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  return status.ok();
}

// A streaming call through the generic stub, driven one operation at a time
// on its own completion queue, so that a call the transport holds back (no
// stream available) can be watched without blocking.
class RawStream {
 public:
  // Sends `request`; `half_close` ends the client's side after it.
  RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
            const std::string& request, bool half_close)
      : stub_(channel), half_close_(half_close) {
    grpc::Slice slice(request);
    request_ = grpc::ByteBuffer(&slice, 1);
    call_ = stub_.PrepareCall(&context_, method, &cq_);
    call_->StartCall(Tag(kStart));
  }
  ~RawStream() {
    context_.TryCancel();
    WaitEnd(30s);
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  // Waits up to `timeout` for the first response: false when none came (not
  // yet, or the call ended: see status()).
  bool WaitFirstMessage(std::chrono::milliseconds timeout) {
    const auto deadline = In(timeout);
    while (messages_ == 0 && !status_.has_value()) {
      if (!Step(deadline)) return false;
    }
    return messages_ > 0;
  }
  // Waits up to `timeout` for the call to end; true once it has.
  bool WaitEnd(std::chrono::milliseconds timeout) {
    const auto deadline = In(timeout);
    while (!status_.has_value()) {
      if (!Step(deadline)) return false;
    }
    return true;
  }
  void Cancel() { context_.TryCancel(); }
  const std::optional<grpc::Status>& status() const { return status_; }

 private:
  enum Op { kStart = 1, kWrite, kWritesDone, kRead, kFinish };
  static void* Tag(Op op) { return reinterpret_cast<void*>(static_cast<intptr_t>(op)); }

  // Waits for the pending operation and starts the next; false at the deadline.
  bool Step(std::chrono::system_clock::time_point deadline) {
    void* tag = nullptr;
    bool ok = false;
    if (cq_.AsyncNext(&tag, &ok, deadline) != grpc::CompletionQueue::GOT_EVENT) return false;
    const Op op = static_cast<Op>(reinterpret_cast<intptr_t>(tag));
    if (op == kFinish) {
      status_ = finish_status_;
    } else if (!ok && op != kWritesDone) {
      call_->Finish(&finish_status_, Tag(kFinish));
    } else if (op == kStart) {
      call_->Write(request_, Tag(kWrite));
    } else if (op == kWrite && half_close_) {
      call_->WritesDone(Tag(kWritesDone));
    } else {
      if (op == kRead) ++messages_;
      call_->Read(&response_, Tag(kRead));
    }
    return true;
  }

  grpc::GenericStub stub_;
  const bool half_close_;
  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  grpc::Status finish_status_;
  std::optional<grpc::Status> status_;
  int messages_ = 0;
};

// A health watch: its first message comes as soon as the call starts, then
// the stream stays open until it is cancelled or its connection closes.
std::unique_ptr<RawStream> Watch(const std::shared_ptr<grpc::Channel>& channel) {
  return std::make_unique<RawStream>(channel, kWatch, "", /*half_close=*/true);
}

TEST(GrpcLimitsTest, MaxConcurrentStreamsHoldsBackTheThirdStream) {
  ServerOptions options = testing::TestOptions();
  options.grpc.max_concurrent_streams = 2;
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto channel = OwnChannel(server->port());
  ASSERT_TRUE(Connected(channel));
  std::unique_ptr<RawStream> first = Watch(channel);
  std::unique_ptr<RawStream> second = Watch(channel);
  ASSERT_TRUE(first->WaitFirstMessage(10s));
  ASSERT_TRUE(second->WaitFirstMessage(10s));

  // The third waits for a free stream; it does not fail.
  std::unique_ptr<RawStream> third = Watch(channel);
  EXPECT_FALSE(third->WaitFirstMessage(1500ms));
  EXPECT_FALSE(third->status().has_value());

  // Another connection is served meanwhile.
  auto other = OwnChannel(server->port());
  EXPECT_EQ(testing::HealthStatus(other, ""), kServing);
  EXPECT_TRUE(CompleteOk(other));

  // One stream ends: the third starts.
  first->Cancel();
  ASSERT_TRUE(first->WaitEnd(10s));
  EXPECT_TRUE(third->WaitFirstMessage(10s));
}

TEST(GrpcLimitsTest, IdleConnectionIsClosedAndTheNextCallReconnects) {
  ServerOptions options = testing::TestOptions();
  options.grpc.max_connection_idle = 1s;
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto idle = OwnChannel(server->port());
  auto busy = OwnChannel(server->port());
  EXPECT_EQ(testing::HealthStatus(idle, ""), kServing);
  ASSERT_TRUE(Connected(busy));
  std::unique_ptr<RawStream> watch = Watch(busy);  // a call open: not idle
  ASSERT_TRUE(watch->WaitFirstMessage(10s));

  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(LeavesReady(idle, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 500ms);
  EXPECT_EQ(busy->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_FALSE(watch->status().has_value());
  EXPECT_TRUE(CompleteOk(idle));
}

TEST(GrpcLimitsTest, MaxConnectionAgeLetsStreamsFinishWithinTheGrace) {
  ServerOptions options = testing::TestOptions();
  options.grpc.max_connection_age = 1s;  // +-10% jitter
  options.grpc.max_connection_age_grace = 3s;
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto channel = OwnChannel(server->port());
  ASSERT_TRUE(Connected(channel));
  const auto connected = std::chrono::steady_clock::now();
  std::unique_ptr<RawStream> stream = Watch(channel);
  ASSERT_TRUE(stream->WaitFirstMessage(10s));

  // GOAWAY at the age: the channel leaves the connection, whose stream lives on.
  EXPECT_TRUE(LeavesReady(channel, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - connected, 800ms);
  std::this_thread::sleep_until(connected + 2500ms);
  EXPECT_FALSE(stream->WaitEnd(1ms)) << "the stream ended within the grace period";
  // A new call goes over a new connection.
  EXPECT_TRUE(CompleteOk(channel));

  // Past age + grace the old connection is closed, and the stream with it.
  ASSERT_TRUE(stream->WaitEnd(15s)) << "the stream outlived the grace period";
  EXPECT_GE(std::chrono::steady_clock::now() - connected, 3500ms);
  EXPECT_FALSE(stream->status()->ok());
  EXPECT_TRUE(CompleteOk(channel));
}

// Keepalive pings as often as the client allows (gRPC's C++ client spaces
// them at least a second apart whatever these ask), with or without calls.
grpc::ChannelArguments FrequentPings();

// A bare HTTP/2 client on a socket: it sends the connection preface and
// acknowledges the server's settings, but never answers a PING.
class SilentHttp2Client {
 public:
  explicit SilentHttp2Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    // The preface, then an empty SETTINGS frame.
    const std::string hello = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                              std::string("\0\0\0\x04\0\0\0\0\0", 9);
    connected_ = connected_ && Send(hello);
  }
  ~SilentHttp2Client() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return connected_; }
  int pings() const { return pings_; }

  // Reads frames for up to `timeout`; true when the server closed the connection.
  bool ReadUntilClosed(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) return true;
      buffer_.append(chunk, static_cast<size_t>(n));
      ParseFrames();
    }
  }

 private:
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  void ParseFrames() {
    while (buffer_.size() >= 9) {
      const auto* h = reinterpret_cast<const unsigned char*>(buffer_.data());
      const size_t length = (size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2];
      if (buffer_.size() < 9 + length) return;
      const int type = h[3], flags = h[4];
      if (type == 4 && (flags & 1) == 0) Send(std::string("\0\0\0\x04\x01\0\0\0\0", 9));
      if (type == 6 && (flags & 1) == 0) ++pings_;
      buffer_.erase(0, 9 + length);
    }
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
  int pings_ = 0;
};

TEST(GrpcLimitsTest, KeepaliveClosesConnectionsThatDoNotAnswerPings) {
  ServerOptions options = testing::TestOptions();
  options.grpc.keepalive_time = 500ms;
  options.grpc.keepalive_timeout = 500ms;
  std::unique_ptr<Server> server = testing::StartServer(options);
  SilentHttp2Client client(server->port());
  ASSERT_TRUE(client.connected());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(client.ReadUntilClosed(15s));
  EXPECT_GE(client.pings(), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);
  EXPECT_EQ(testing::HealthStatus(OwnChannel(server->port()), ""), kServing);
}

TEST(GrpcLimitsTest, KeepaliveOffLeavesSilentConnectionsOpen) {
  ServerOptions options = testing::TestOptions();
  options.grpc.keepalive_time = 0ms;
  std::unique_ptr<Server> server = testing::StartServer(options);
  SilentHttp2Client client(server->port());
  ASSERT_TRUE(client.connected());
  EXPECT_FALSE(client.ReadUntilClosed(3s));
  EXPECT_EQ(client.pings(), 0);
}

grpc::ChannelArguments FrequentPings() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 100);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 100);
  return args;
}

TEST(GrpcLimitsTest, ClientPingingTooOftenGetsGoaway) {
  ServerOptions options = testing::TestOptions();
  options.grpc.keepalive_min_client_interval = 5s;
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto pinger = OwnChannel(server->port(), FrequentPings());
  auto other = OwnChannel(server->port());
  ASSERT_TRUE(Connected(pinger));
  ASSERT_TRUE(Connected(other));
  // Three pings within the interval: GOAWAY too_many_pings.
  EXPECT_TRUE(LeavesReady(pinger, 15s));
  EXPECT_EQ(other->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_EQ(testing::HealthStatus(other, ""), kServing);
  EXPECT_TRUE(CompleteOk(other));
}

TEST(GrpcLimitsTest, PingsAtThePermittedRateKeepTheConnection) {
  ServerOptions options = testing::TestOptions();
  options.grpc.keepalive_min_client_interval = 0ms;  // any rate, idle connections too
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto pinger = OwnChannel(server->port(), FrequentPings());
  ASSERT_TRUE(Connected(pinger));
  EXPECT_FALSE(LeavesReady(pinger, 5s));
  EXPECT_TRUE(CompleteOk(pinger));
}

// Synchronous handlers (server reflection) are capped by the thread quota;
// the callback services (inference, health) are not, and stay served.
TEST(GrpcLimitsTest, ThreadQuotaRefusesSyncCallsAndKeepsServing) {
  ServerOptions options = testing::TestOptions();
  options.grpc.max_threads = 2;
  options.grpc.memory_quota = int64_t{16} << 20;
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto channel = OwnChannel(server->port());
  EXPECT_EQ(testing::HealthStatus(channel, ""), kServing);
  EXPECT_TRUE(CompleteOk(channel));

  // Open reflection streams each hold a handler thread.
  std::vector<std::unique_ptr<RawStream>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(std::make_unique<RawStream>(channel, kReflection, kListServices,
                                                  /*half_close=*/false));
  }
  int served = 0, exhausted = 0;
  for (auto& stream : streams) {
    if (stream->WaitFirstMessage(10s)) {
      ++served;
    } else if (stream->status().has_value() &&
               stream->status()->error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
    }
  }
  EXPECT_GE(served, 1);
  EXPECT_GE(exhausted, 1);
  EXPECT_EQ(served + exhausted, 4);

  // Health and many concurrent generations go on meanwhile, on the
  // connection already open (a new connection's handshake may itself be
  // refused while the quota is exhausted).
  EXPECT_EQ(testing::HealthStatus(channel, ""), kServing);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&] {
      if (CompleteOk(channel)) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 16);

  // Threads come back when the streams end (their handlers return soon after).
  streams.clear();
  bool served_later = false;
  for (int attempt = 0; attempt < 50 && !served_later; ++attempt) {
    RawStream later(channel, kReflection, kListServices, /*half_close=*/false);
    served_later = later.WaitFirstMessage(10s);
    if (!served_later) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(served_later);
  EXPECT_EQ(testing::HealthStatus(channel, ""), kServing);
}

// Requests larger than the memory quota are refused by the transport
// (RESOURCE_EXHAUSTED, or UNAVAILABLE when their connection is closed to
// reclaim memory) before they reach the service, which would answer
// INVALID_ARGUMENT (text too long); the server stays up.
TEST(GrpcLimitsTest, MemoryQuotaRefusesOversizedTrafficAndKeepsServing) {
  ServerOptions options = testing::TestOptions();
  options.grpc.memory_quota = int64_t{1} << 20;
  std::unique_ptr<Server> server = testing::StartServer(options);
  constexpr int kCalls = 8;
  std::vector<grpc::StatusCode> codes(kCalls, grpc::StatusCode::OK);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      auto stub = v1::Inference::NewStub(OwnChannel(server->port()));
      grpc::ClientContext context;
      context.set_deadline(In(30s));
      v1::TokenizeRequest request;
      request.set_text(std::string(3 << 20, 'a'));
      v1::TokenizeResponse response;
      codes[i] = stub->Tokenize(&context, request, &response).error_code();
    });
  }
  for (std::thread& t : threads) t.join();
  int refused = 0;
  for (grpc::StatusCode code : codes) {
    EXPECT_TRUE(code == grpc::StatusCode::INVALID_ARGUMENT ||
                code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                code == grpc::StatusCode::UNAVAILABLE)
        << code;
    if (code != grpc::StatusCode::INVALID_ARGUMENT) ++refused;
  }
  EXPECT_GE(refused, 1);
  // The quota's memory comes back as the refused calls' buffers are freed,
  // which may take a moment after the flood: a call right then may still be
  // refused, but within seconds the server serves again.
  std::optional<int> health;
  std::shared_ptr<grpc::Channel> channel;
  for (int attempt = 0; attempt < 50 && health != kServing; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(200ms);
    channel = OwnChannel(server->port());
    health = testing::HealthStatus(channel, "");
  }
  EXPECT_EQ(health, kServing);
  EXPECT_TRUE(CompleteOk(channel));
}

}  // namespace
}  // namespace tessera::server
