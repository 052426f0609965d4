#include "server/http/json_body.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera::server::http {
namespace {

// Thrown from the parser callback to stop at the first violation.
struct Refused {
  std::string message;
};

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonBody(std::string_view body) {
  using Event = nlohmann::json::parse_event_t;
  // The keys seen in each open object, innermost last.
  std::vector<std::set<std::string>> open_objects;
  auto check = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth > kMaxJsonDepth) {
      throw Refused{absl::StrCat("the JSON body nests deeper than ", kMaxJsonDepth, " levels")};
    }
    switch (event) {
      case Event::object_start:
        open_objects.emplace_back();
        break;
      case Event::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Event::key:
        if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second) {
          throw Refused{absl::StrCat("duplicate key '", parsed.get<std::string>(),
                                     "' in a JSON object")};
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(body.begin(), body.end(), check, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/false);
  } catch (const Refused& refused) {
    return absl::InvalidArgumentError(refused.message);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the body is not valid JSON: ", e.what()));
  }
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tessera::server::http
