// Keeps the TLS certificates of a running server current: checks the files
// every refresh interval and, when their contents changed and are a valid
// chain with its key, installs them; a bad or half-written set is logged and
// the previous certificates stay in use.
//
// The installed set is also staged as files in a private temp directory
// (staged_*_path), which gRPC's file-watching certificate provider reads, so
// that gRPC only ever sees sets that passed the checks.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tls/tls_material.h"
#include "server/tls/tls_options.h"

namespace tessera::server::tls {

class TlsReloader {
 public:
  using Listener = std::function<void(const TlsMaterial&)>;

  // Loads and checks the files (errors name the file) and stages them.
  static absl::StatusOr<std::unique_ptr<TlsReloader>> Create(const TlsOptions& options);
  ~TlsReloader();  // stops polling and removes the staged files

  TlsReloader(const TlsReloader&) = delete;
  TlsReloader& operator=(const TlsReloader&) = delete;

  const TlsOptions& options() const { return options_; }
  std::shared_ptr<const TlsMaterial> current() const;

  // Called on the polling thread with each newly installed set. Add
  // listeners before Start.
  void AddListener(Listener listener);
  // Polls every options().refresh_interval until destroyed.
  void Start();
  // Checks the files once; true when a new set was installed.
  bool CheckNow();

  // The staged copies of the installed set (through a link that is swapped
  // atomically on each install).
  std::string staged_cert_path() const { return staged_dir_ + "/current/cert.pem"; }
  std::string staged_key_path() const { return staged_dir_ + "/current/key.pem"; }
  std::string staged_client_ca_path() const { return staged_dir_ + "/current/ca.pem"; }

 private:
  explicit TlsReloader(TlsOptions options);
  absl::Status Stage(const TlsMaterial& material);
  void Poll();

  const TlsOptions options_;
  std::string staged_dir_;
  int generation_ = 0;  // of the staged set; used by the polling thread
  TlsMaterial last_read_;  // the bytes last read, valid or not (polling thread)
  std::string last_error_;  // the last reload error logged (polling thread)
  std::vector<Listener> listeners_;

  mutable std::mutex mu_;
  std::shared_ptr<const TlsMaterial> current_;  // guarded by mu_
  bool stop_ = false;                           // guarded by mu_
  std::condition_variable wake_;
  std::thread poller_;
};

}  // namespace tessera::server::tls
