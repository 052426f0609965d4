#include "server/tls/tls_material.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"

namespace tessera::server::tls {
namespace {

// Files larger than this are surely not PEM certificates or keys.
constexpr std::streamsize kMaxPemBytes = 1 << 20;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* x509) const { X509_free(x509); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

// OpenSSL's last queued error, as text (and clears the queue).
std::string OpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Every certificate in `pem`; INVALID_ARGUMENT when there is none or one does
// not parse.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const std::string& pem,
                                                       const std::string& path) {
  std::vector<X509Ptr> certs;
  BioPtr bio = MemoryBio(pem);
  ERR_clear_error();
  while (true) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    certs.push_back(std::move(cert));
  }
  // Reaching the end of the data leaves a "no start line" error; anything
  // else (or no certificate at all) is a broken file.
  const unsigned long last = ERR_peek_last_error();
  const bool clean_end = ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  if (certs.empty() || (last != 0 && !clean_end)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' holds no valid PEM certificate: ", OpenSslError()));
  }
  ERR_clear_error();
  return certs;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string message =
        absl::StrCat("cannot read the ", what, " '", path, "': ", std::strerror(error));
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::NotFoundError(message);
  }
  std::string data(static_cast<size_t>(kMaxPemBytes) + 1, '\0');
  in.read(data.data(), kMaxPemBytes + 1);
  if (in.bad()) {
    return absl::NotFoundError(absl::StrCat("cannot read the ", what, " '", path, "'"));
  }
  data.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<std::streamsize>(data.size()) > kMaxPemBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", what, " '", path, "' is larger than ", kMaxPemBytes, " bytes"));
  }
  return data;
}

}  // namespace

absl::Status CheckTlsOptions(const TlsOptions& options) {
  if (!options.cert_path.empty() && options.key_path.empty()) {
    return absl::FailedPreconditionError("--tls-cert needs --tls-key");
  }
  if (options.cert_path.empty() && !options.key_path.empty()) {
    return absl::FailedPreconditionError("--tls-key needs --tls-cert");
  }
  if (!options.client_ca_path.empty() && options.cert_path.empty()) {
    return absl::FailedPreconditionError(
        "--tls-client-ca needs --tls-cert and --tls-key (client certificates are checked only "
        "over TLS)");
  }
  if (options.refresh_interval.count() < 1) {
    return absl::FailedPreconditionError("the TLS refresh interval must be at least 1 second");
  }
  return absl::OkStatus();
}

absl::StatusOr<TlsMaterial> ReadTlsFiles(const TlsOptions& options) {
  TlsMaterial material;
  absl::StatusOr<std::string> cert = ReadFile(options.cert_path, "TLS certificate");
  if (!cert.ok()) return cert.status();
  material.cert_pem = *std::move(cert);
  absl::StatusOr<std::string> key = ReadFile(options.key_path, "TLS key");
  if (!key.ok()) return key.status();
  material.key_pem = *std::move(key);
  if (!options.client_ca_path.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(options.client_ca_path, "TLS client CA");
    if (!ca.ok()) return ca.status();
    material.client_ca_pem = *std::move(ca);
  }
  return material;
}

absl::Status CheckTlsMaterial(const TlsMaterial& material, const TlsOptions& options) {
  absl::StatusOr<std::vector<X509Ptr>> chain =
      ParseCertificates(material.cert_pem, options.cert_path);
  if (!chain.ok()) return chain.status();
  BioPtr bio = MemoryBio(material.key_pem);
  ERR_clear_error();
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", options.key_path, "' holds no valid PEM private key: ", OpenSslError()));
  }
  if (X509_check_private_key(chain->front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("the TLS key '", options.key_path,
                                                   "' does not match the certificate '",
                                                   options.cert_path, "'"));
  }
  if (!options.client_ca_path.empty()) {
    absl::StatusOr<std::vector<X509Ptr>> cas =
        ParseCertificates(material.client_ca_pem, options.client_ca_path);
    if (!cas.ok()) return cas.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsOptions& options) {
  absl::StatusOr<TlsMaterial> material = ReadTlsFiles(options);
  if (!material.ok()) return material.status();
  absl::Status status = CheckTlsMaterial(*material, options);
  if (!status.ok()) return status;
  return material;
}

}  // namespace tessera::server::tls
