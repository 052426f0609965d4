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

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 50051;         // 0 picks a free port
  int metrics_port = 9090;  // 0 disables /metrics; kAnyFreePort picks one
  std::string metrics_host;  // address of /metrics; empty follows `host`
  // The OpenAI-compatible HTTP front: 0 disables it; kAnyFreePort picks one.
  int http_port = 8000;
  int64_t http_max_body_bytes = int64_t{8} << 20;        // larger bodies: 413
  std::chrono::milliseconds http_header_timeout{10000};  // request head and body
  std::chrono::milliseconds http_idle_timeout{60000};    // keep-alive wait for the next request
  tls::TlsOptions tls;      // TLS on the gRPC and HTTP ports (off by default)
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
