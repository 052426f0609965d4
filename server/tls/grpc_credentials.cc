#include "server/tls/grpc_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

namespace tessera::server::tls {
namespace {

// How often gRPC re-reads the staged copies: they change only when the
// reloader installs a checked set, so this adds at most a second to the
// reloader's own interval.
constexpr unsigned int kStagedRefreshSeconds = 1;

}  // namespace

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsReloader& reloader) {
  namespace gx = grpc::experimental;
  const bool mutual = !reloader.options().client_ca_path.empty();
  auto provider = std::make_shared<gx::FileWatcherCertificateProvider>(
      reloader.staged_key_path(), reloader.staged_cert_path(),
      mutual ? reloader.staged_client_ca_path() : "", kStagedRefreshSeconds);
  gx::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return gx::TlsServerCredentials(options);
}

}  // namespace tessera::server::tls
