#include "server/tls/tls_reloader.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace tessera::server::tls {
namespace {

namespace fs = std::filesystem;

absl::Status WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakePrivateDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                     "/tessera-tls-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a directory for the TLS files: ", std::strerror(errno)));
  }
  return pattern;  // mkdtemp makes it 0700
}

}  // namespace

TlsReloader::TlsReloader(TlsOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<TlsReloader>> TlsReloader::Create(const TlsOptions& options) {
  absl::Status status = CheckTlsOptions(options);
  if (!status.ok()) return status;
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(options);
  if (!material.ok()) return material.status();
  absl::StatusOr<std::string> dir = MakePrivateDir();
  if (!dir.ok()) return dir.status();
  std::unique_ptr<TlsReloader> reloader(new TlsReloader(options));
  reloader->staged_dir_ = *std::move(dir);
  status = reloader->Stage(*material);
  if (!status.ok()) return status;
  reloader->last_read_ = *material;
  reloader->current_ = std::make_shared<const TlsMaterial>(*std::move(material));
  return reloader;
}

TlsReloader::~TlsReloader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
  std::error_code ignored;
  if (!staged_dir_.empty()) fs::remove_all(staged_dir_, ignored);
}

std::shared_ptr<const TlsMaterial> TlsReloader::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void TlsReloader::AddListener(Listener listener) { listeners_.push_back(std::move(listener)); }

void TlsReloader::Start() {
  poller_ = std::thread([this] { Poll(); });
}

void TlsReloader::Poll() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, options_.refresh_interval, [this] { return stop_; })) {
    lock.unlock();
    CheckNow();
    lock.lock();
  }
}

bool TlsReloader::CheckNow() {
  absl::StatusOr<TlsMaterial> read = ReadTlsFiles(options_);
  absl::Status status = read.status();
  if (read.ok()) {
    if (*read == last_read_) return false;
    last_read_ = *read;
    status = CheckTlsMaterial(*read, options_);
  }
  if (status.ok()) status = Stage(*read);
  if (!status.ok()) {
    const std::string error(status.message());
    if (error != last_error_) {
      spdlog::error("TLS files not reloaded, the previous certificates stay in use: {}", error);
      last_error_ = error;
    }
    return false;
  }
  last_error_.clear();
  auto installed = std::make_shared<const TlsMaterial>(*std::move(read));
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = installed;
  }
  for (const Listener& listener : listeners_) listener(*installed);
  spdlog::info("reloaded the TLS certificate '{}'", options_.cert_path);
  return true;
}

// Writes the set into a new generation directory, then swaps the "current"
// link to it in one rename, so that a reader sees the old set or the new one.
absl::Status TlsReloader::Stage(const TlsMaterial& material) {
  const int generation = ++generation_;
  const std::string dir = absl::StrCat(staged_dir_, "/", generation);
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create '", dir, "': ", ec.message()));
  absl::Status status = WriteFile(dir + "/key.pem", material.key_pem);
  if (status.ok()) status = WriteFile(dir + "/cert.pem", material.cert_pem);
  if (status.ok()) status = WriteFile(dir + "/ca.pem", material.client_ca_pem);
  if (!status.ok()) return status;
  const std::string link = staged_dir_ + "/next";
  fs::remove(link, ec);
  fs::create_directory_symlink(std::to_string(generation), link, ec);
  if (!ec) fs::rename(link, staged_dir_ + "/current", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot stage the TLS files: ", ec.message()));
  // The generation before the previous one is surely no longer being read.
  fs::remove_all(absl::StrCat(staged_dir_, "/", generation - 2), ec);
  return absl::OkStatus();
}

}  // namespace tessera::server::tls
