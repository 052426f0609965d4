// Translation between the API's protobuf messages and the engine's types.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/validation.h"
#include "tessera/v1/inference.pb.h"

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace tessera::server {

// Parses a raw request. Requests are taken as raw bytes so that malformed
// ones (e.g. invalid UTF-8 in a string field, which protobuf refuses to
// parse) get INVALID_ARGUMENT rather than gRPC's generic failure.
absl::Status ParseMessage(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* message);
// A call the client has already cancelled (a stream reset before its
// request was read arrives as an empty request) ends as CANCELLED, or as
// DEADLINE_EXCEEDED when its deadline had passed, whatever the request's own
// checks said.
// The most bytes of request metadata (keys and values) one call may carry;
// more fails that call alone with RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxRequestMetadataBytes = 64 << 10;
absl::Status CheckRequestMetadata(const grpc::ServerContextBase& context);
absl::Status CancelledIfGone(const grpc::ServerContextBase& context, const absl::Status& status);
// The same decision from its parts: `status`, unless the call was cancelled
// (`cancelled`), which makes it DEADLINE_EXCEEDED when `deadline` had passed
// at `now` (CancelStatus) and CANCELLED otherwise.
absl::Status CancelledIfGone(bool cancelled, std::chrono::system_clock::time_point deadline,
                             std::chrono::system_clock::time_point now, const absl::Status& status);
grpc::ByteBuffer SerializeMessage(const google::protobuf::MessageLite& message);

// Builds the engine's request from a proto request that passed
// ValidateGenerateRequest: tokenizes a text prompt (adding BOS when the model
// asks for it), checks the prompt against the model, applies the documented
// defaults and draws a random seed when none is given.
absl::StatusOr<GenerationRequest> BuildGenerationRequest(const v1::GenerateRequest& proto,
                                                         const Tokenizer& tokenizer,
                                                         const ModelLimits& limits);

// A seed from the OS entropy source (for requests without one).
uint64_t RandomSeed();

// The engine deadline for a gRPC deadline (time_point::max() when none).
Clock::time_point ToEngineDeadline(std::chrono::system_clock::time_point deadline);
// The status of a call that gRPC cancelled at `now`: DEADLINE_EXCEEDED when
// its deadline has passed or is within kDeadlineSlack, else CANCELLED
// (the client cancelled). The slack covers two things: the server's deadline
// timer may fire just before the deadline on the realtime clock, and the
// server's deadline is the grpc-timeout header counted from when it read the
// call, so a server that reads a call late holds a deadline later than the
// client's by that delay; the client's own timer then fires first and its
// cancel arrives while the server still sees time left.
inline constexpr std::chrono::milliseconds kDeadlineSlack{250};
grpc::Status CancelStatus(std::chrono::system_clock::time_point deadline,
                          std::chrono::system_clock::time_point now);

// Appends an event's token ids, text and (when `with_logprobs`) logprobs.
void AppendTokens(const TokenEvent& event, bool with_logprobs, const Tokenizer& tokenizer,
                  v1::GenerateResponse* response);
void AppendTokens(const TokenEvent& event, bool with_logprobs, const Tokenizer& tokenizer,
                  v1::CompleteResponse* response);

// Sets the final text, finish reason, usage and timings.
void SetFinish(const FinishEvent& event, v1::GenerateResponse* response);
void SetFinish(const FinishEvent& event, v1::CompleteResponse* response);

v1::FinishReason ToProtoFinishReason(FinishReason reason);

// The status a finished request ends with. `client_cancel` is the status
// recorded when the client cancelled the call or its deadline passed.
grpc::Status FinishStatus(const FinishEvent& event,
                          const std::optional<grpc::Status>& client_cancel);

// `text` with every byte that is not part of a valid UTF-8 sequence replaced
// by U+FFFD (protobuf string fields must hold valid UTF-8).
std::string ToLossyUtf8(std::string_view text);

}  // namespace tessera::server
