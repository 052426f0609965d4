// Reading and checking the PEM files that TLS serves with.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/tls/tls_options.h"

namespace tessera::server::tls {

// The contents of the TLS files, checked: the certificate chain parses, the
// key parses and belongs to the chain's first certificate, and the client
// CA bundle (if any) parses.
struct TlsMaterial {
  std::string cert_pem;
  std::string key_pem;
  std::string client_ca_pem;  // empty: no client certificates are asked for

  bool operator==(const TlsMaterial&) const = default;
};

// FAILED_PRECONDITION for inconsistent options (a key without a
// certificate, a client CA without a certificate...); OK when TLS is off.
absl::Status CheckTlsOptions(const TlsOptions& options);

// The raw bytes of the files named by `options`, unchecked (NOT_FOUND or
// PERMISSION_DENIED when one cannot be read).
absl::StatusOr<TlsMaterial> ReadTlsFiles(const TlsOptions& options);

// INVALID_ARGUMENT, naming the file, when `material` is not a usable
// certificate chain, matching key and CA bundle.
absl::Status CheckTlsMaterial(const TlsMaterial& material, const TlsOptions& options);

// ReadTlsFiles then CheckTlsMaterial.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsOptions& options);

}  // namespace tessera::server::tls
