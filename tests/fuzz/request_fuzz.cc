// gRPC request validation: arbitrary bytes parsed as the tessera.v1 request
// messages, then the shared checks of server/validation.h (no server).
//
// Input: byte 0 picks the message; the rest is its wire encoding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "server/validation.h"
#include "tessera/v1/inference.pb.h"

namespace {

namespace v1 = tessera::v1;
using tessera::server::ModelLimits;

constexpr ModelLimits kLimits{/*vocab_size=*/32000, /*context_length=*/2048};

void Generate(const uint8_t* data, size_t size) {
  v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  const auto status = tessera::server::ValidateGenerateRequest(request, kLimits);
  const int32_t max_tokens = tessera::server::EffectiveMaxTokens(request);
  if (!status.ok()) return;
  tessera::fuzz::Check(max_tokens >= 0, "a valid request has max_tokens >= 0");
  if (request.has_token_ids()) {
    const auto& ids = request.token_ids().ids();
    (void)tessera::server::ValidatePrompt({ids.data(), static_cast<size_t>(ids.size())}, max_tokens,
                                          kLimits);
  }
}

void Tokenize(const uint8_t* data, size_t size) {
  v1::TokenizeRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  (void)tessera::server::ValidateTokenizeRequest(request);
}

void Detokenize(const uint8_t* data, size_t size) {
  v1::DetokenizeRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  if (!tessera::server::ValidateDetokenizeRequest(request, kLimits).ok()) return;
  for (int32_t id : request.token_ids()) {
    tessera::fuzz::Check(id >= 0 && id < kLimits.vocab_size, "validated ids are in the vocab");
  }
}

// A chat request's generation fields, validated the way GenerateRequest's are.
void Chat(const uint8_t* data, size_t size) {
  v1::ChatRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  v1::GenerateRequest generate;
  generate.set_text("rendered prompt");
  *generate.mutable_sampling() = request.sampling();
  *generate.mutable_stopping() = request.stopping();
  generate.set_top_logprobs(request.top_logprobs());
  generate.set_logprobs(request.logprobs());
  generate.set_request_id(request.request_id());
  (void)tessera::server::ValidateGenerateRequest(generate, kLimits);
  (void)tessera::server::EffectiveMaxTokens(generate);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 4) {
    case 0: Generate(data + 1, size - 1); break;
    case 1: Tokenize(data + 1, size - 1); break;
    case 2: Detokenize(data + 1, size - 1); break;
    default: Chat(data + 1, size - 1); break;
  }
  return 0;
}
