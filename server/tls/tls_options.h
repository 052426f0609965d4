// TLS settings of the serving ports (gRPC and the HTTP front).
#pragma once

#include <chrono>
#include <string>

namespace tessera::server::tls {

struct TlsOptions {
  std::string cert_path;       // PEM certificate chain; set with key_path, TLS is on
  std::string key_path;        // PEM private key of the chain's first certificate
  std::string client_ca_path;  // PEM CA bundle: clients must present a certificate it signed
  // How often the files are checked for new contents.
  std::chrono::seconds refresh_interval{60};

  // Any TLS flag given (an inconsistent set fails the server's start).
  bool enabled() const {
    return !cert_path.empty() || !key_path.empty() || !client_ca_path.empty();
  }
};

}  // namespace tessera::server::tls
