// The byte stream under one HTTP connection: plain TCP, or TLS over TCP when
// the front serves TLS. Both keep Beast's per-operation timeouts.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace tessera::server::http {

class Stream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;

  // `tls` null: plain TCP. The connection keeps its context alive.
  Stream(boost::asio::ip::tcp::socket socket, std::shared_ptr<boost::asio::ssl::context> tls)
      : context_(std::move(tls)) {
    if (context_ != nullptr) {
      tls_.emplace(std::move(socket), *context_);
    } else {
      tcp_.emplace(std::move(socket));
    }
  }

  bool is_tls() const { return tls_.has_value(); }
  executor_type get_executor() { return layer().get_executor(); }
  boost::beast::tcp_stream& layer() { return tls_ ? tls_->next_layer() : *tcp_; }
  boost::asio::ip::tcp::socket& socket() { return layer().socket(); }
  template <class Duration>
  void expires_after(Duration d) { layer().expires_after(d); }
  void expires_never() { layer().expires_never(); }
  void close() { layer().close(); }

  // The server side of the TLS handshake; completes at once for plain TCP.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    if (tls_) {
      tls_->async_handshake(boost::asio::ssl::stream_base::server, std::forward<Handler>(handler));
    } else {
      boost::asio::post(get_executor(), [h = std::forward<Handler>(handler)]() mutable {
        h(boost::system::error_code());
      });
    }
  }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<Handler>(handler));
    tcp_->async_read_some(buffers, std::forward<Handler>(handler));
  }

  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_write_some(buffers, std::forward<Handler>(handler));
    tcp_->async_write_some(buffers, std::forward<Handler>(handler));
  }

  // A read that waits, with no time limit, for the client to send more or go
  // away while a response is produced: on the raw socket for plain TCP; for
  // TLS through the TLS layer (whose read timer is turned off first, so
  // that only writes keep their limits).
  template <class MutableBuffers, class Handler>
  void async_watch_read(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->next_layer().expires_never();
      return tls_->async_read_some(buffers, std::forward<Handler>(handler));
    }
    tcp_->socket().async_read_some(buffers, std::forward<Handler>(handler));
  }

 private:
  std::shared_ptr<boost::asio::ssl::context> context_;
  std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> tls_;
  std::optional<boost::beast::tcp_stream> tcp_;
};

}  // namespace tessera::server::http
