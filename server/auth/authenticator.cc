#include "server/auth/authenticator.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::server::auth {
namespace {

constexpr char kRefusalPayload[] = "tessera.auth.refusal";
constexpr absl::string_view kBearer = "bearer";

const char* FrontText(Front front) { return front == Front::kHttp ? "http" : "grpc"; }

// The key of an "authorization: Bearer KEY" value, or nullopt when the value
// does not have that form (the scheme is case-insensitive, RFC 7235).
std::optional<absl::string_view> BearerToken(absl::string_view value) {
  value = absl::StripAsciiWhitespace(value);
  if (value.size() <= kBearer.size() || !absl::EqualsIgnoreCase(value.substr(0, kBearer.size()), kBearer) ||
      (value[kBearer.size()] != ' ' && value[kBearer.size()] != '\t')) {
    return std::nullopt;
  }
  absl::string_view token = absl::StripLeadingAsciiWhitespace(value.substr(kBearer.size()));
  if (token.empty()) return std::nullopt;
  return token;
}

// The key `credentials` present: empty when none, nullopt when the
// authorization header is not "Bearer KEY" (it wins over x-api-key).
std::optional<absl::string_view> PresentedKey(const Credentials& credentials) {
  if (credentials.authorization.has_value()) return BearerToken(*credentials.authorization);
  if (credentials.api_key.has_value()) return absl::StripAsciiWhitespace(*credentials.api_key);
  return absl::string_view();
}

}  // namespace

const char* RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kMissingKey:
      return "missing_key";
    case Refusal::kMalformedHeader:
      return "malformed_header";
    case Refusal::kInvalidKey:
      return "invalid_key";
  }
  return "invalid_key";
}

Authenticator::Authenticator(std::shared_ptr<KeyStore> keys, Metrics* metrics)
    : keys_(std::move(keys)), metrics_(metrics) {}

std::optional<std::string> Authenticator::Identify(const Credentials& credentials) const {
  std::optional<absl::string_view> presented = PresentedKey(credentials);
  if (!presented.has_value() || presented->empty()) return std::nullopt;
  return keys_->Find(*presented);
}

absl::StatusOr<std::string> Authenticator::Check(const Credentials& credentials, Front front,
                                                 absl::string_view target) const {
  const std::optional<absl::string_view> key = PresentedKey(credentials);
  if (!key.has_value()) {
    return Refuse(Refusal::kMalformedHeader,
                  "the authorization header must be 'Bearer YOUR_API_KEY'", front, target, "");
  }
  const absl::string_view presented = *key;
  if (presented.empty()) {
    return Refuse(Refusal::kMissingKey,
                  "no API key provided: send it as 'authorization: Bearer YOUR_API_KEY'", front,
                  target, "");
  }
  std::optional<std::string> name = keys_->Find(presented);
  if (!name.has_value()) {
    return Refuse(Refusal::kInvalidKey, "incorrect API key provided", front, target,
                  Fingerprint(presented));
  }
  spdlog::debug("{} {}: key '{}'", FrontText(front), std::string(target.substr(0, 160)), *name);
  return *std::move(name);
}

absl::Status Authenticator::Refuse(Refusal refusal, std::string message, Front front,
                                   absl::string_view target, absl::string_view fingerprint) const {
  if (metrics_ != nullptr) metrics_->RecordAuthFailure(RefusalName(refusal), front);
  const std::string where(target.substr(0, 160));  // client-chosen: bounded in logs
  std::string detail = RefusalName(refusal);
  if (!fingerprint.empty()) absl::StrAppend(&detail, ", fingerprint ", fingerprint);
  int64_t suppressed = 0;
  if (MayLog(suppressed)) {
    spdlog::warn("{} {}: refused ({}){}", FrontText(front), where, detail,
                 suppressed > 0 ? absl::StrCat("; ", suppressed, " more refusals were not logged")
                                : "");
  }
  absl::Status status = absl::UnauthenticatedError(std::move(message));
  status.SetPayload(kRefusalPayload, absl::Cord(RefusalName(refusal)));
  return status;
}

bool Authenticator::MayLog(int64_t& suppressed) const {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(log_mu_);
  if (now - log_window_ >= std::chrono::seconds(1)) {
    log_window_ = now;
    logged_in_window_ = 0;
  }
  if (logged_in_window_ >= kLogsPerSecond) {
    ++suppressed_;
    return false;
  }
  ++logged_in_window_;
  suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

std::optional<Refusal> Authenticator::RefusalOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kRefusalPayload);
  if (!payload.has_value()) return std::nullopt;
  for (Refusal r : {Refusal::kMissingKey, Refusal::kMalformedHeader, Refusal::kInvalidKey}) {
    if (*payload == RefusalName(r)) return r;
  }
  return std::nullopt;
}

}  // namespace tessera::server::auth
