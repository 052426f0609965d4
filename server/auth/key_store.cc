#include "server/auth/key_store.h"

#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace tessera::server::auth {
namespace {

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

// Printable ASCII without spaces.
bool IsKeyChar(char c) { return c > 0x20 && c < 0x7f; }

absl::Status LineError(absl::string_view origin, int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ":", line, ": ", what));
}

absl::Status ValidateName(absl::string_view name, absl::string_view origin, int line) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return LineError(origin, line, absl::StrCat("a key name must have 1 to ", kMaxNameBytes,
                                                " characters"));
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return LineError(origin, line, "a key name may only have letters, digits, '.', '_' and '-'");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSecret(absl::string_view secret, absl::string_view origin, int line) {
  if (secret.size() < kMinKeyBytes || secret.size() > kMaxKeyBytes) {
    return LineError(origin, line, absl::StrCat("a key must have ", kMinKeyBytes, " to ",
                                                kMaxKeyBytes, " characters, this one has ",
                                                secret.size()));
  }
  for (char c : secret) {
    if (!IsKeyChar(c)) {
      return LineError(origin, line,
                       "a key may only have printable ASCII characters, without spaces");
    }
  }
  return absl::OkStatus();
}

// One non-blank, non-comment line.
absl::StatusOr<ApiKey> ParseLine(absl::string_view text, absl::string_view origin, int line) {
  ApiKey key;
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) {
    key.secret = std::string(text);
  } else {
    key.name = std::string(absl::StripAsciiWhitespace(text.substr(0, colon)));
    key.secret = std::string(absl::StripAsciiWhitespace(text.substr(colon + 1)));
    absl::Status status = ValidateName(key.name, origin, line);
    if (!status.ok()) return status;
  }
  absl::Status status = ValidateSecret(key.secret, origin, line);
  if (!status.ok()) return status;
  if (key.name.empty()) key.name = "fp:" + Fingerprint(key.secret);
  return key;
}

}  // namespace

absl::StatusOr<std::vector<ApiKey>> ParseKeyFile(absl::string_view text,
                                                 absl::string_view origin) {
  if (text.size() > kMaxKeyFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": a key file must be at most ", kMaxKeyFileBytes, " bytes"));
  }
  std::vector<ApiKey> keys;
  std::set<std::string> names;
  std::set<std::string> secrets;
  int line = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    for (char c : raw) {
      if (c != '\t' && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)) {
        return LineError(origin, line, "control character in the line");
      }
    }
    const absl::string_view trimmed = absl::StripAsciiWhitespace(raw);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    absl::StatusOr<ApiKey> key = ParseLine(trimmed, origin, line);
    if (!key.ok()) return key.status();
    if (!names.insert(key->name).second) {
      return LineError(origin, line, absl::StrCat("the key name '", key->name, "' repeats"));
    }
    if (!secrets.insert(key->secret).second) {
      return LineError(origin, line, "this key repeats an earlier line's key");
    }
    if (keys.size() == kMaxKeys) {
      return LineError(origin, line, absl::StrCat("more than ", kMaxKeys, " keys"));
    }
    keys.push_back(*std::move(key));
  }
  if (keys.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": the key file holds no key"));
  }
  return keys;
}

absl::StatusOr<std::vector<ApiKey>> ReadKeyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the key file '", path, "'"));
  std::string text;
  // One byte past the limit is enough to refuse an oversized file.
  text.resize(kMaxKeyFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return absl::NotFoundError(absl::StrCat("cannot read the key file '", path, "'"));
  text.resize(static_cast<size_t>(in.gcount()));
  return ParseKeyFile(text, path);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Runs over b whatever a is: a string of another length is compared
  // with b itself, and the length mismatch decides.
  const bool same_size = a.size() == b.size();
  const absl::string_view x = same_size ? a : b;
  unsigned char diff = same_size ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    diff |= static_cast<unsigned char>(x[i]) ^ static_cast<unsigned char>(b[i]);
  }
  // Through a volatile, so that the loop cannot be turned into an early exit.
  volatile unsigned char result = diff;
  return result == 0;
}

std::string Fingerprint(absl::string_view secret) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : secret) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return absl::StrFormat("%08x", static_cast<uint32_t>(hash ^ (hash >> 32)));
}

KeyStore::KeyStore(std::vector<ApiKey> keys, std::string path)
    : path_(std::move(path)),
      keys_(std::make_shared<const std::vector<ApiKey>>(std::move(keys))) {}

absl::StatusOr<std::shared_ptr<KeyStore>> KeyStore::Load(const std::string& path) {
  absl::StatusOr<std::vector<ApiKey>> keys = ReadKeyFile(path);
  if (!keys.ok()) return keys.status();
  return std::make_shared<KeyStore>(*std::move(keys), path);
}

absl::Status KeyStore::Reload() {
  if (path_.empty()) return absl::FailedPreconditionError("these keys come from no file");
  absl::StatusOr<std::vector<ApiKey>> keys = ReadKeyFile(path_);
  if (!keys.ok()) return keys.status();
  auto fresh = std::make_shared<const std::vector<ApiKey>>(*std::move(keys));
  std::lock_guard<std::mutex> lock(mu_);
  keys_ = std::move(fresh);
  return absl::OkStatus();
}

std::optional<std::string> KeyStore::Find(absl::string_view presented) const {
  std::shared_ptr<const std::vector<ApiKey>> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys = keys_;
  }
  const ApiKey* match = nullptr;
  for (const ApiKey& key : *keys) {
    if (ConstantTimeEquals(presented, key.secret)) match = &key;
  }
  if (match == nullptr) return std::nullopt;
  return match->name;
}

size_t KeyStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_->size();
}

}  // namespace tessera::server::auth
