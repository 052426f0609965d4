// What every tessera-cli command shares: the channel, the options and the
// mapping of gRPC failures to messages and exit codes.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include "client/cli_args.h"
#include "client/tls_channel.h"
#include "client/interrupt.h"

namespace tessera::cli {

struct Session {
  Options options;
  std::shared_ptr<grpc::Channel> channel;
  InterruptWatcher* interrupts = nullptr;
};

// Creates the channel to options.server (with TLS when options.tls says so);
// null, after printing why, when a TLS file cannot be read.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& server,
                                           const client::ClientTls& tls = {});

// Sets the --timeout deadline and the --api-key, if any, on `context`.
void ApplyCallOptions(const Options& options, grpc::ClientContext& context);

// "INVALID_ARGUMENT" and so on.
const char* StatusCodeName(grpc::StatusCode code);

// True when `status` says no connection to the server could be made (as
// opposed to the server refusing the request).
bool IsUnreachable(const grpc::Status& status, grpc::Channel& channel);

// Prints the failure of a call to stderr and returns the exit code: 130 when
// the user interrupted, 3 when the server could not be reached, else 4.
int ReportRpcFailure(const Session& session, const grpc::Status& status);

}  // namespace tessera::cli
