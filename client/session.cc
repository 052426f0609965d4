#include "client/session.h"

#include <chrono>
#include <cstdio>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

namespace tessera::cli {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& server,
                                           const client::ClientTls& tls) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      client::MakeChannelCredentials(tls);
  if (!credentials.ok()) {
    std::fprintf(stderr, "tessera-cli: %s\n", std::string(credentials.status().message()).c_str());
    return nullptr;
  }
  grpc::ChannelArguments args;
  // A long completion with logprobs can exceed gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(64 << 20);
  // gRPC's default reconnect backoff grows to minutes; `info --wait` polls a
  // server that is still starting, so it should notice it within a second.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(server, *credentials, args);
}

void ApplyCallOptions(const Options& options, grpc::ClientContext& context) {
  if (!options.api_key.empty()) context.AddMetadata("authorization", "Bearer " + options.api_key);
  if (options.timeout_seconds <= 0) return;
  const auto timeout = std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::duration<double>(options.timeout_seconds));
  context.set_deadline(std::chrono::system_clock::now() + timeout);
}

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN_CODE";
  }
}

bool IsUnreachable(const grpc::Status& status, grpc::Channel& channel) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return false;
  }
  // A server that answered UNAVAILABLE itself leaves the channel connected.
  return channel.GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY;
}

int ReportRpcFailure(const Session& session, const grpc::Status& status) {
  if (session.interrupts != nullptr && session.interrupts->interrupted()) {
    std::fprintf(stderr, "tessera-cli: interrupted\n");
    return kExitInterrupted;
  }
  if (IsUnreachable(status, *session.channel)) {
    std::fprintf(stderr, "tessera-cli: cannot reach server at %s: %s\n",
                 session.options.server.c_str(), status.error_message().c_str());
    return kExitUnreachable;
  }
  std::fprintf(stderr, "tessera-cli: request failed: %s: %s\n",
               StatusCodeName(status.error_code()), status.error_message().c_str());
  return kExitRequestFailed;
}

}  // namespace tessera::cli
