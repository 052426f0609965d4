// The one check of API keys both fronts use: parses what a client sent
// (`authorization: Bearer KEY`, or `x-api-key: KEY`), looks the key up,
// counts and logs refusals (with the key's fingerprint, never the key).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/auth/key_store.h"
#include "server/metrics.h"

namespace tessera::server::auth {

// What a request carried; nullopt: the header was absent.
struct Credentials {
  std::optional<absl::string_view> authorization;  // "Bearer KEY"
  std::optional<absl::string_view> api_key;        // x-api-key: KEY
};

// Why a request was refused (the `reason` label of the failure counter).
enum class Refusal { kMissingKey, kMalformedHeader, kInvalidKey };

// Refusals logged per second at most (the rest are counted in one line).
inline constexpr int64_t kLogsPerSecond = 20;
const char* RefusalName(Refusal refusal);

class Authenticator {
 public:
  // `metrics` may be null (nothing counted).
  Authenticator(std::shared_ptr<KeyStore> keys, Metrics* metrics);

  // The matched key's name, or UNAUTHENTICATED with a message for the
  // client. `target` (a gRPC method or an HTTP path) is only logged.
  absl::StatusOr<std::string> Check(const Credentials& credentials, Front front,
                                    absl::string_view target) const;

  // The name of the key `credentials` carry, or nullopt; neither counts nor
  // logs (for calls Check already let in).
  std::optional<std::string> Identify(const Credentials& credentials) const;

  // The reason a refused Check gave (from the status' payload).
  static std::optional<Refusal> RefusalOf(const absl::Status& status);

  KeyStore& keys() const { return *keys_; }

 private:
  absl::Status Refuse(Refusal refusal, std::string message, Front front, absl::string_view target,
                      absl::string_view fingerprint) const;
  // Whether a refusal may be logged now: at most kLogsPerSecond a second,
  // so that a flood of bad requests cannot flood the log (each is counted).
  // Sets `suppressed` to the refusals not logged since the last one logged.
  bool MayLog(int64_t& suppressed) const;

  std::shared_ptr<KeyStore> keys_;
  Metrics* metrics_;
  mutable std::mutex log_mu_;
  mutable std::chrono::steady_clock::time_point log_window_;  // guarded by log_mu_
  mutable int64_t logged_in_window_ = 0;                      // guarded by log_mu_
  mutable int64_t suppressed_ = 0;                            // guarded by log_mu_
};

}  // namespace tessera::server::auth
