// The one place where absl::Status turns into grpc::Status.
#pragma once

#include <string_view>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tessera::server {

grpc::StatusCode ToGrpcCode(absl::StatusCode code);
grpc::Status ToGrpcStatus(const absl::Status& status);
// The canonical upper-case name, e.g. "INVALID_ARGUMENT" (a metric label).
std::string_view GrpcCodeName(grpc::StatusCode code);

}  // namespace tessera::server
