// The gRPC port's connection limits: concurrent streams, idle and maximum
// connection age, keepalive and its enforcement, and a resource quota on
// handler threads and transport memory.
#pragma once

#include <grpcpp/server_builder.h>

#include "server/options.h"

namespace tessera::server {

// Pings a client may send too early (see GrpcLimits::keepalive_min_client_interval)
// before the connection is closed with GOAWAY too_many_pings.
inline constexpr int kMaxPingStrikes = 2;

// Sets `limits` on `builder` (channel arguments and a grpc::ResourceQuota).
void ApplyGrpcLimits(const GrpcLimits& limits, grpc::ServerBuilder& builder);

}  // namespace tessera::server
