#include "server/tls/serving_tls.h"

#include <utility>

#include "server/tls/grpc_credentials.h"

namespace tessera::server::tls {

absl::StatusOr<std::unique_ptr<ServingTls>> StartServingTls(const TlsOptions& options) {
  absl::StatusOr<std::unique_ptr<TlsReloader>> reloader = TlsReloader::Create(options);
  if (!reloader.ok()) return reloader.status();
  absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> context =
      MakeSslContext(*(*reloader)->current());
  if (!context.ok()) return context.status();
  auto tls = std::make_unique<ServingTls>();
  tls->mutual = !options.client_ca_path.empty();
  tls->http = std::make_shared<SslContextSource>(*std::move(context));
  tls->reloader = *std::move(reloader);
  tls->grpc = GrpcServerCredentials(*tls->reloader);
  tls->reloader->AddListener(
      [http = tls->http](const TlsMaterial& material) { http->Update(material); });
  tls->reloader->Start();
  return tls;
}

}  // namespace tessera::server::tls
