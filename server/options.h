// Settings of a tessera-server process.
#pragma once

#include <chrono>
#include <string>

#include "engine/engine.h"

namespace tessera::server {

// ServerOptions::metrics_port value that binds any free port (for tests).
inline constexpr int kAnyFreePort = -1;

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 50051;         // 0 picks a free port
  int metrics_port = 9090;  // 0 disables /metrics; kAnyFreePort picks one
  std::string metrics_host;  // address of /metrics; empty follows `host`
  EngineOptions engine;     // engine.model_path is required
  std::chrono::milliseconds drain_timeout{30000};
  // A forward pass running longer than this is reported as stalled (logged,
  // counted, health NOT_SERVING until it ends); 0 disables the watchdog.
  std::chrono::milliseconds step_watchdog{60000};
  std::string log_level = "info";
};

}  // namespace tessera::server
