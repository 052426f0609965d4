#include "server/http/http_server.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace tessera::server::http {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// The time slice HTTP I/O threads ask for (the kernel's minimum is 100 us).
constexpr uint64_t kIoSliceNanoseconds = 100'000;

void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::debug("open-file limit raised from {} to {}", before, limit.rlim_cur);
  }
}

// Asks the kernel for a short time slice for the calling I/O thread. Its work
// comes in small bursts (a token to write) while the engine's threads keep
// every core busy; with the default slice a woken I/O thread waits until the
// running engine thread's slice ends (EEVDF runs the current task to parity,
// ~1.5-3 ms), which shows as TTFT. A shorter requested slice makes it preempt
// at once (Linux 6.12+; older kernels ignore the request). Costs nothing when
// cores are idle.
void RequestShortSlice() {
  // struct sched_attr of sched_setattr(2) (SCHED_ATTR_SIZE_VER0); glibc 2.36
  // declares no wrapper, and <linux/sched/types.h> clashes with <sched.h>.
  struct {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
  } attr{};
  static_assert(sizeof(attr) == 48);
  // Only the slice changes: the thread keeps its policy and nice value (a
  // server started with nice, or as SCHED_BATCH, stays so).
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) != 0) return;
  if (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH) return;
  attr.size = sizeof(attr);
  attr.sched_flags = 0;
  attr.sched_runtime = kIoSliceNanoseconds;
  if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0) {
    spdlog::debug("HTTP I/O thread: no short time slice ({})", std::strerror(errno));
  }
}

}  // namespace

HttpServer::HttpServer(HttpEnv env) : env_(std::move(env)), acceptor_(io_), retry_timer_(io_) {}

HttpServer::~HttpServer() { Stop(std::chrono::steady_clock::now()); }

absl::Status HttpServer::Start(const std::string& host, int port, int threads) {
  RaiseOpenFileLimit();
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) {
    // A host name (as gRPC's --host takes): its first IPv4 address, else
    // its first address.
    tcp::resolver resolver(io_);
    const tcp::resolver::results_type found = resolver.resolve(host, "", ec);
    if (ec || found.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bad HTTP host '", host, "'"));
    }
    address = found.begin()->endpoint().address();
    for (const auto& entry : found) {
      if (entry.endpoint().address().is_v4()) {
        address = entry.endpoint().address();
        break;
      }
    }
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", host, ":", port, ": ", ec.message()));
  }
  port_ = acceptor_.local_endpoint().port();
  Accept();
  for (int i = 0; i < std::max(threads, 1); ++i) {
    threads_.emplace_back([this] {
      RequestShortSlice();
      io_.run();
    });
  }
  return absl::OkStatus();
}

void HttpServer::Accept() {
  acceptor_.async_accept(asio::make_strand(io_), [this](boost::system::error_code ec,
                                                       tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // Out of file descriptors, say: try again shortly rather than spin.
      spdlog::warn("HTTP accept failed: {}", ec.message());
      retry_timer_.expires_after(std::chrono::milliseconds(50));
      retry_timer_.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    std::make_shared<Session>(std::move(socket), env_, responses_,
                              tls_ != nullptr ? tls_->Current() : nullptr)
        ->Start();
    Accept();
  });
}

void HttpServer::Stop(std::chrono::steady_clock::time_point deadline) {
  if (stopped_) return;
  stopped_ = true;
  if (!threads_.empty()) {
    asio::post(io_, [this] {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      retry_timer_.cancel();
    });
    while (responses_.active() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  io_.stop();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

}  // namespace tessera::server::http
