// The clients' TLS flags (--tls-ca, --tls-cert, --tls-key); see tls_channel.h.
#pragma once

#include <string>

namespace tessera::client {

struct ClientTls {
  std::string ca_path;    // empty: the system's CA certificates
  std::string cert_path;  // client certificate chain (mutual TLS)
  std::string key_path;   // its private key

  bool enabled() const { return !ca_path.empty() || !cert_path.empty() || !key_path.empty(); }
};

}  // namespace tessera::client
