// API keys: the key file's format, and the keys a server accepts now.
//
// A key file has one key per line, optionally named: `name:key`. Blank
// lines and lines starting with `#` are ignored; surrounding spaces are
// trimmed. Names are 1-64 of [A-Za-z0-9._-]; keys are 16-512 printable
// ASCII characters without spaces (a key that contains ':' must be named).
// Unnamed keys are named by their fingerprint in logs. Names and keys must
// be unique, and a file must hold at least one key.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::server::auth {

inline constexpr size_t kMinKeyBytes = 16;
inline constexpr size_t kMaxKeyBytes = 512;
inline constexpr size_t kMaxNameBytes = 64;
inline constexpr size_t kMaxKeyFileBytes = size_t{1} << 20;
inline constexpr size_t kMaxKeys = 10000;

struct ApiKey {
  std::string name;    // from the file, or "fp:" + fingerprint when unnamed
  std::string secret;
};

// Parses key file text; `origin` (the file name) prefixes error messages,
// which give the line number but never a key.
absl::StatusOr<std::vector<ApiKey>> ParseKeyFile(absl::string_view text,
                                                 absl::string_view origin);

// Reads and parses the key file at `path`: NOT_FOUND when it cannot be
// read, INVALID_ARGUMENT when it is malformed.
absl::StatusOr<std::vector<ApiKey>> ReadKeyFile(const std::string& path);

// Whether `a` equals `b`, in a time that depends only on b's length (`b` is
// the stored key; `a` is what a client sent).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// A short, stable fingerprint of a secret for logs (8 hex digits of a
// 64-bit FNV-1a hash): tells keys apart without revealing them.
std::string Fingerprint(absl::string_view secret);

// The keys in force; thread-safe. Lookups compare a presented key with
// every stored key (no early exit), so their time does not depend on which
// key, if any, matched.
class KeyStore {
 public:
  // A store of `keys` that reloads from `path` (empty: Reload fails).
  KeyStore(std::vector<ApiKey> keys, std::string path);

  // Loads the key file at `path`.
  static absl::StatusOr<std::shared_ptr<KeyStore>> Load(const std::string& path);

  // Re-reads the file. On error the keys in force stay, and the error is
  // returned; on success the new keys replace them at once.
  absl::Status Reload();

  // The name of the key equal to `presented`, or nullopt.
  std::optional<std::string> Find(absl::string_view presented) const;

  size_t size() const;
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<ApiKey>> keys_;  // guarded by mu_
};

}  // namespace tessera::server::auth
