// Checked access to parsed JSON.

#include "engine/tokenizer/hf_json.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {

absl::StatusOr<const Json*> Member(const Json& object, std::string_view key,
                                   std::string_view where) {
  if (!object.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(AsAbsl(where), " is not an object"));
  }
  auto it = object.find(key);
  if (it == object.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), " has no \"", AsAbsl(key), "\""));
  }
  return &*it;
}

const Json* OptionalMember(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

absl::StatusOr<std::string> StringMember(const Json& object, std::string_view key,
                                         std::string_view where) {
  auto m = Member(object, key, where);
  if (!m.ok()) return m.status();
  if (!(*m)->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), ".", AsAbsl(key), " is not a string"));
  }
  return (*m)->get<std::string>();
}

absl::StatusOr<bool> BoolMember(const Json& object, std::string_view key, bool fallback,
                                std::string_view where) {
  const Json* m = OptionalMember(object, key);
  if (m == nullptr) return fallback;
  if (!m->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), ".", AsAbsl(key), " is not a boolean"));
  }
  return m->get<bool>();
}

absl::StatusOr<std::string> TypeOf(const Json& object, std::string_view where) {
  return StringMember(object, "type", where);
}

absl::Status Unsupported(std::string_view what, std::string_view where) {
  return absl::UnimplementedError(
      absl::StrCat(AsAbsl(where), ": unsupported ", AsAbsl(what)));
}

}  // namespace tessera::tokenizer_internal
