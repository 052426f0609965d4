// Strict parsing of JSON request bodies: RFC 8259 JSON (no NaN, no
// comments), valid UTF-8, no duplicate keys in an object and a bounded
// nesting depth. Failures are INVALID_ARGUMENT with a message for the client.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace tessera::server::http {

inline constexpr int kMaxJsonDepth = 64;

absl::StatusOr<nlohmann::json> ParseJsonBody(std::string_view body);

// Serializes for a response: bytes that are not valid UTF-8 (a token's
// partial character) become U+FFFD rather than an error.
std::string DumpJson(const nlohmann::json& value);

}  // namespace tessera::server::http
