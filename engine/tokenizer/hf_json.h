// Checked access to parsed JSON for tokenizer.json. Private to engine/tokenizer.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::tokenizer_internal {

using Json = nlohmann::json;

// Each accessor names `where` (a path such as "model.vocab") in its errors.
absl::StatusOr<const Json*> Member(const Json& object, std::string_view key, std::string_view where);
// nullptr when the key is absent or null.
const Json* OptionalMember(const Json& object, std::string_view key);
absl::StatusOr<std::string> StringMember(const Json& object, std::string_view key,
                                         std::string_view where);
absl::StatusOr<bool> BoolMember(const Json& object, std::string_view key, bool fallback,
                                std::string_view where);
// The "type" of a component object.
absl::StatusOr<std::string> TypeOf(const Json& object, std::string_view where);
absl::Status Unsupported(std::string_view what, std::string_view where);

}  // namespace tessera::tokenizer_internal
