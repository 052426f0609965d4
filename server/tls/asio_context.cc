#include "server/tls/asio_context.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace tessera::server::tls {

namespace ssl = boost::asio::ssl;

absl::StatusOr<std::shared_ptr<ssl::context>> MakeSslContext(const TlsMaterial& material) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                       ec);
  if (!ec) context->use_certificate_chain(boost::asio::buffer(material.cert_pem), ec);
  if (!ec) context->use_private_key(boost::asio::buffer(material.key_pem), ssl::context::pem, ec);
  if (!ec && !material.client_ca_pem.empty()) {
    context->add_certificate_authority(boost::asio::buffer(material.client_ca_pem), ec);
    if (!ec) context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot make the HTTP TLS context: ", ec.message()));
  }
  return context;
}

std::shared_ptr<ssl::context> SslContextSource::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void SslContextSource::Update(const TlsMaterial& material) {
  absl::StatusOr<std::shared_ptr<ssl::context>> context = MakeSslContext(material);
  if (!context.ok()) {
    spdlog::error("the HTTP front keeps its previous TLS certificates: {}",
                  std::string(context.status().message()));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  current_ = *std::move(context);
}

}  // namespace tessera::server::tls
