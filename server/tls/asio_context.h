// Boost.Asio TLS contexts for the HTTP front, rebuilt on each reload: a new
// connection takes the newest context, a connection keeps the one it started
// with.
#pragma once

#include <memory>
#include <mutex>

#include <boost/asio/ssl/context.hpp>

#include "absl/status/statusor.h"
#include "server/tls/tls_material.h"

namespace tessera::server::tls {

// A server context (TLS 1.2 and later) for `material`; with a client CA,
// clients must present a certificate that it signed.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeSslContext(
    const TlsMaterial& material);

// The current context; Update is called from the reloader's thread.
class SslContextSource {
 public:
  explicit SslContextSource(std::shared_ptr<boost::asio::ssl::context> initial)
      : current_(std::move(initial)) {}

  std::shared_ptr<boost::asio::ssl::context> Current() const;
  // Keeps the previous context when `material` cannot make one (logged).
  void Update(const TlsMaterial& material);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;  // guarded by mu_
};

}  // namespace tessera::server::tls
