// JSON parsing for model files: nlohmann-json with duplicate object keys and
// excessive nesting refused (a plain json::parse keeps the last duplicate).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera {

// Nesting deeper than this is refused; model files need a few levels.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` as one JSON value. INVALID_ARGUMENT naming `what` for syntax
// errors, a duplicate key (with its object's path) or nesting deeper than
// kMaxJsonDepth.
absl::StatusOr<nlohmann::json> ParseJsonStrict(std::string_view text, std::string_view what);

}  // namespace tessera
