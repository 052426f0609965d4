// The OpenAI-compatible HTTP front: an asynchronous Boost.Beast server on a
// few I/O threads (no thread per connection), sharing the gRPC front's
// engine, validation, admission and metrics.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/status/status.h"
#include "server/http/routes.h"
#include "server/http/session.h"
#include "server/tls/asio_context.h"

namespace tessera::server::http {

class HttpServer {
 public:
  explicit HttpServer(HttpEnv env);
  ~HttpServer();  // Stop(now)

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on host:port (0: a free port) and starts `threads` I/O threads.
  // Raises the open-file limit to its maximum so that thousands of
  // connections fit.
  absl::Status Start(const std::string& host, int port, int threads);
  int port() const { return port_; }
  // Serves TLS with the source's current context (call before Start).
  void UseTls(std::shared_ptr<tls::SslContextSource> tls) { tls_ = std::move(tls); }

  // Stops accepting, waits until `deadline` for responses in flight to be
  // written, then stops the I/O threads. Connections are closed when the
  // server is destroyed (after the engine, whose events may still be queued
  // for them).
  void Stop(std::chrono::steady_clock::time_point deadline);

 private:
  void Accept();

  HttpEnv env_;
  ResponseCounter responses_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;
  std::vector<std::thread> threads_;
  std::shared_ptr<tls::SslContextSource> tls_;  // null: plain HTTP
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace tessera::server::http
