// TLS for the clients' gRPC channels: --tls-ca (the CA that signed the
// server's certificate) and, for servers that require client certificates,
// --tls-cert and --tls-key.
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/tls_options.h"

namespace tessera::client {


namespace tls_internal {
inline absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream data;
  if (in) data << in.rdbuf();
  if (!in || data.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  }
  return data.str();
}
}  // namespace tls_internal

// Plain-text credentials when `tls` is off; errors name the flag.
inline absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTls& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  if (tls.cert_path.empty() != tls.key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions ssl;
  const std::pair<const std::string*, std::string*> files[] = {
      {&tls.ca_path, &ssl.pem_root_certs},
      {&tls.cert_path, &ssl.pem_cert_chain},
      {&tls.key_path, &ssl.pem_private_key}};
  const char* flags[] = {"--tls-ca", "--tls-cert", "--tls-key"};
  for (int i = 0; i < 3; ++i) {
    if (files[i].first->empty()) continue;
    absl::StatusOr<std::string> pem = tls_internal::ReadPem(*files[i].first, flags[i]);
    if (!pem.ok()) return pem.status();
    *files[i].second = *std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace tessera::client
