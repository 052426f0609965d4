#include "server/grpc_limits.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

#include <grpcpp/resource_quota.h>

namespace tessera::server {
namespace {

int ClampedMs(std::chrono::milliseconds d) {
  return static_cast<int>(std::min<int64_t>(d.count(), std::numeric_limits<int>::max()));
}

// A duration argument, or nothing when the limit is off (0).
void SetDuration(grpc::ServerBuilder& builder, const char* name, std::chrono::milliseconds d) {
  if (d.count() > 0) builder.AddChannelArgument(name, ClampedMs(d));
}

}  // namespace

void ApplyGrpcLimits(const GrpcLimits& limits, grpc::ServerBuilder& builder) {
  if (limits.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams);
  }
  SetDuration(builder, GRPC_ARG_MAX_CONNECTION_IDLE_MS, limits.max_connection_idle);
  SetDuration(builder, GRPC_ARG_MAX_CONNECTION_AGE_MS, limits.max_connection_age);
  SetDuration(builder, GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, limits.max_connection_age_grace);
  // gRPC's server default is a ping every 2 hours; off means never.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             limits.keepalive_time.count() > 0
                                 ? ClampedMs(limits.keepalive_time)
                                 : std::numeric_limits<int>::max());
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ClampedMs(limits.keepalive_timeout));
  // Idle connections are pinged too, and clients may ping them (at the
  // minimum interval): many clients keep idle channels alive that way, and
  // a strict server would close them after two pings.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ClampedMs(limits.keepalive_min_client_interval));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, kMaxPingStrikes);
  if (limits.max_threads > 0 || limits.memory_quota > 0) {
    grpc::ResourceQuota quota("tessera-grpc");
    if (limits.max_threads > 0) quota.SetMaxThreads(limits.max_threads);
    if (limits.memory_quota > 0) quota.Resize(static_cast<size_t>(limits.memory_quota));
    builder.SetResourceQuota(quota);
  }
}

}  // namespace tessera::server
