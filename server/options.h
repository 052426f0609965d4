// Settings of a tessera-server process.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "server/tls/tls_options.h"

namespace tessera::server {

// ServerOptions::metrics_port value that binds any free port (for tests).
inline constexpr int kAnyFreePort = -1;

// Connection limits of the gRPC port (applied in server/grpc_limits.h). A
// duration of 0 turns its limit off.
struct GrpcLimits {
  int32_t max_concurrent_streams = 256;  // per connection; 0: gRPC's default (no limit)
  std::chrono::milliseconds max_connection_idle{0};  // close connections idle this long
  std::chrono::milliseconds max_connection_age{0};   // GOAWAY connections this old
  // Time the calls of an aged connection get to finish; 0: as long as they take.
  std::chrono::milliseconds max_connection_age_grace{0};
  std::chrono::milliseconds keepalive_time{60000};     // ping connections quiet this long
  std::chrono::milliseconds keepalive_timeout{20000};  // close when the ping goes unanswered
  // Clients pinging more often (or sending pings with no data) get
  // GOAWAY too_many_pings after kMaxPingStrikes such pings; 0: no minimum.
  std::chrono::milliseconds keepalive_min_client_interval{10000};
  int32_t max_threads = 64;   // threads of synchronous gRPC handlers; 0: no cap
  int64_t memory_quota = 0;   // bytes of gRPC buffers; 0: no quota
};

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 50051;         // 0 picks a free port
  int metrics_port = 9090;  // 0 disables /metrics; kAnyFreePort picks one
  std::string metrics_host;  // address of /metrics; empty follows `host`
  bool metrics_tls = false;  // the metrics port serves HTTPS with the `tls` settings
  // The OpenAI-compatible HTTP front: 0 disables it; kAnyFreePort picks one.
  int http_port = 8000;
  int64_t http_max_body_bytes = int64_t{8} << 20;        // larger bodies: 413
  std::chrono::milliseconds http_header_timeout{10000};  // request head and body
  std::chrono::milliseconds http_idle_timeout{60000};    // keep-alive wait for the next request
  tls::TlsOptions tls;      // TLS on the gRPC and HTTP ports (off by default)
  GrpcLimits grpc;          // the gRPC port's connection limits
  EngineOptions engine;     // engine.model_path is required
  std::chrono::milliseconds drain_timeout{30000};
  // A forward pass running longer than this is reported as stalled (logged,
  // counted, health NOT_SERVING until it ends); 0 disables the watchdog.
  std::chrono::milliseconds step_watchdog{60000};
  std::string log_level = "info";
  // API keys (see server/auth/key_store.h); empty: no key is needed.
  std::string api_key_file;
  bool auth_health = false;  // with keys: health checks need a key too
  int32_t max_queued_requests_per_key = 0;  // with keys: queued requests per key; 0: no cap
};

}  // namespace tessera::server
