// OpenAI HTTP front: arbitrary request bodies through the strict JSON parser,
// then the /v1/completions, /v1/chat/completions and /apply-template request
// parsers, and the shared validation of the GenerateRequest they build.
// A body that parses must serialize and parse back to the same value.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "server/http/json_body.h"
#include "server/http/openai_request.h"
#include "server/validation.h"

namespace {

namespace http = tessera::server::http;

constexpr tessera::server::ModelLimits kLimits{/*vocab_size=*/32000, /*context_length=*/2048};

void Validate(const absl::StatusOr<http::OpenAiRequest>& request) {
  if (!request.ok()) return;
  tessera::fuzz::Check(request->n >= 1 && request->n <= http::kMaxChoices, "n within 1..kMaxChoices");
  (void)tessera::server::ValidateGenerateRequest(request->proto, kLimits);
  (void)tessera::server::EffectiveMaxTokens(request->proto);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto json = http::ParseJsonBody(body);
  if (!json.ok()) return 0;
  const std::string dumped = http::DumpJson(*json);
  auto again = http::ParseJsonBody(dumped);
  tessera::fuzz::Check(again.ok(), "a parsed body serializes to a body that parses");
  tessera::fuzz::Check(*again == *json, "a parsed body round-trips through DumpJson");
  Validate(http::ParseCompletionRequest(*json));
  Validate(http::ParseChatRequest(*json));
  (void)http::ParseTemplateRequest(*json);
  return 0;
}
