// TLS for a server's ports: the checked certificates, their reloading, and
// what the gRPC and HTTP fronts serve them with.
#pragma once

#include <memory>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "server/tls/asio_context.h"
#include "server/tls/tls_options.h"
#include "server/tls/tls_reloader.h"

namespace tessera::server::tls {

struct ServingTls {
  std::shared_ptr<grpc::ServerCredentials> grpc;
  std::shared_ptr<SslContextSource> http;
  std::unique_ptr<TlsReloader> reloader;  // destroyed first: it updates `http`
  bool mutual = false;                    // client certificates are required
};

// Checks the options and files (errors name the flag or the file) and starts
// watching the files for changes.
absl::StatusOr<std::unique_ptr<ServingTls>> StartServingTls(const TlsOptions& options);

}  // namespace tessera::server::tls
