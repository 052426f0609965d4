// gRPC server credentials that serve the reloader's certificates and follow
// its reloads (through gRPC's file-watching certificate provider on the
// staged copies).
#pragma once

#include <memory>

#include <grpcpp/security/server_credentials.h>

#include "server/tls/tls_reloader.h"

namespace tessera::server::tls {

// With a client CA, clients must present a certificate that it signed.
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsReloader& reloader);

}  // namespace tessera::server::tls
