// The TLS files' checks and their reloading, on certificates that openssl
// makes at test time (tests/e2e/lib/tls_certs.sh): a matching chain and key
// pass, a wrong key, broken PEM and missing files are refused with the file
// named, and the reloader installs only valid changed sets (also staged for
// gRPC).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/tls/tls_material.h"
#include "server/tls/tls_reloader.h"

namespace tessera::server::tls {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream data;
  data << in.rdbuf();
  return data.str();
}

void Copy(const std::string& from, const std::string& to) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

class TlsFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(fs::temp_directory_path() /
                           ("tessera-tls-test-" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    const std::string script = std::string(TESSERA_SOURCE_DIR) + "/tests/e2e/lib/tls_certs.sh";
    const std::string command = "command -v openssl >/dev/null && bash -c 'source " + script +
                                " && cd " + *dir_ +
                                " && tls_make_ca . ca1 && tls_make_ca . ca2"
                                " && tls_make_cert . ca1 a server && tls_make_cert . ca2 b server'";
    made_ = std::system(command.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    fs::remove_all(*dir_, ignored);
    delete dir_;
  }
  void SetUp() override {
    if (!made_) GTEST_SKIP() << "openssl could not make the test certificates";
  }
  static std::string F(const std::string& name) { return *dir_ + "/" + name; }
  static TlsOptions Options(const std::string& cert, const std::string& key) {
    TlsOptions options;
    options.cert_path = F(cert);
    options.key_path = F(key);
    return options;
  }

  static std::string* dir_;
  static bool made_;
};
std::string* TlsFilesTest::dir_ = nullptr;
bool TlsFilesTest::made_ = false;

TEST_F(TlsFilesTest, MatchingChainAndKeyLoad) {
  TlsOptions options = Options("a.crt", "a.key");
  options.client_ca_path = F("ca1.crt");
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(options);
  ASSERT_TRUE(material.ok()) << material.status();
  EXPECT_EQ(material->cert_pem, ReadAll(F("a.crt")));
  EXPECT_EQ(material->key_pem, ReadAll(F("a.key")));
  EXPECT_EQ(material->client_ca_pem, ReadAll(F("ca1.crt")));
}

TEST_F(TlsFilesTest, BadFilesAreRefusedByName) {
  absl::Status s = LoadTlsMaterial(Options("a.crt", "b.key")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("b.key' does not match the certificate"));
  s = LoadTlsMaterial(Options("missing.crt", "a.key")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("missing.crt"));
  s = LoadTlsMaterial(Options("a.key", "a.key")).status();
  EXPECT_THAT(s.message(), HasSubstr("a.key' holds no valid PEM certificate"));
  s = LoadTlsMaterial(Options("a.crt", "a.crt")).status();
  EXPECT_THAT(s.message(), HasSubstr("a.crt' holds no valid PEM private key"));
  // A certificate cut short is not a certificate.
  const std::string cert = ReadAll(F("a.crt"));
  std::ofstream(F("cut.crt"), std::ios::binary) << cert.substr(0, cert.size() / 2);
  s = LoadTlsMaterial(Options("cut.crt", "a.key")).status();
  EXPECT_THAT(s.message(), HasSubstr("cut.crt' holds no valid PEM certificate"));
  TlsOptions options = Options("a.crt", "a.key");
  options.client_ca_path = F("a.key");
  EXPECT_THAT(LoadTlsMaterial(options).status().message(),
              HasSubstr("a.key' holds no valid PEM certificate"));
}

TEST_F(TlsFilesTest, InconsistentOptionsAreRefused) {
  TlsOptions options;
  options.client_ca_path = F("ca1.crt");
  EXPECT_THAT(CheckTlsOptions(options).message(), HasSubstr("--tls-client-ca needs --tls-cert"));
  options = Options("a.crt", "a.key");
  options.key_path.clear();
  EXPECT_THAT(CheckTlsOptions(options).message(), HasSubstr("--tls-cert needs --tls-key"));
  options = Options("a.crt", "a.key");
  options.cert_path.clear();
  EXPECT_THAT(CheckTlsOptions(options).message(), HasSubstr("--tls-key needs --tls-cert"));
  EXPECT_TRUE(CheckTlsOptions(Options("a.crt", "a.key")).ok());
  EXPECT_FALSE(TlsReloader::Create(Options("a.crt", "b.key")).ok());
}

TEST_F(TlsFilesTest, ReloaderInstallsOnlyValidChangedSets) {
  Copy(F("a.crt"), F("live.crt"));
  Copy(F("a.key"), F("live.key"));
  absl::StatusOr<std::unique_ptr<TlsReloader>> created =
      TlsReloader::Create(Options("live.crt", "live.key"));
  ASSERT_TRUE(created.ok()) << created.status();
  TlsReloader& reloader = **created;
  int installs = 0;
  reloader.AddListener([&](const TlsMaterial&) { ++installs; });
  EXPECT_EQ(ReadAll(reloader.staged_cert_path()), ReadAll(F("a.crt")));
  EXPECT_EQ(ReadAll(reloader.staged_key_path()), ReadAll(F("a.key")));
  EXPECT_FALSE(reloader.CheckNow());  // unchanged

  // Half-way through a rotation: the new certificate with the old key.
  Copy(F("b.crt"), F("live.crt"));
  EXPECT_FALSE(reloader.CheckNow());
  EXPECT_EQ(reloader.current()->cert_pem, ReadAll(F("a.crt")));
  fs::remove(F("live.key"));  // a missing file keeps the old set too
  EXPECT_FALSE(reloader.CheckNow());
  EXPECT_EQ(ReadAll(reloader.staged_cert_path()), ReadAll(F("a.crt")));

  Copy(F("b.key"), F("live.key"));
  EXPECT_TRUE(reloader.CheckNow());
  EXPECT_EQ(installs, 1);
  EXPECT_EQ(reloader.current()->cert_pem, ReadAll(F("b.crt")));
  EXPECT_EQ(reloader.current()->key_pem, ReadAll(F("b.key")));
  EXPECT_EQ(ReadAll(reloader.staged_cert_path()), ReadAll(F("b.crt")));
  EXPECT_EQ(ReadAll(reloader.staged_key_path()), ReadAll(F("b.key")));
  EXPECT_FALSE(reloader.CheckNow());
  EXPECT_EQ(installs, 1);
}

}  // namespace
}  // namespace tessera::server::tls
