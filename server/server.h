// A tessera server: the gRPC service (with health checking and reflection),
// the /metrics endpoint and the engine, with their startup and shutdown
// order. Shared by tessera-server's main and the tests.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "server/chat_renderer.h"
#include "server/engine_call.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/serving_state.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace tessera::server {

namespace auth {
class Authenticator;
class KeyQueue;
class KeyStore;
}  // namespace auth
class InferenceService;
class ServedChatRenderer;
namespace http {
class HttpServer;
}  // namespace http
namespace tls {
struct ServingTls;
}  // namespace tls

class Server {
 public:
  Server();
  ~Server();  // Shutdown()

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Starts serving gRPC (health NOT_SERVING; inference calls UNAVAILABLE),
  // /metrics and the HTTP front (503 until loaded). The model is not loaded
  // yet. `chat` renders chat prompts for the HTTP front (null: none); it
  // must outlive the server.
  absl::Status Start(const ServerOptions& options, const ChatRenderer* chat = nullptr);
  // Loads the model and starts the engine; health becomes SERVING.
  absl::Status LoadModel();

  // Starts draining: health NOT_SERVING, new generations UNAVAILABLE,
  // requests in flight continue. Returns at once.
  void BeginDrain();
  // Drains: BeginDrain, waits up to `timeout` for requests in flight, then
  // stops the gRPC server (giving responses in flight a grace period) and the
  // engine. Returns true when every request finished within the timeout.
  bool Drain(std::chrono::milliseconds timeout);
  // Stops at once: calls in flight are cancelled. Idempotent.
  void Shutdown();

  // The bound gRPC port, and the /metrics port (0: not exposed).
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // The bound HTTP port (0: the HTTP front is off).
  int http_port() const { return http_port_; }
  // The engine, or null before LoadModel or after shutdown.
  std::shared_ptr<Engine> engine() const;
  Metrics& metrics() { return metrics_; }
  // The API keys in force (null: none needed); Reload() it on SIGHUP.
  std::shared_ptr<auth::KeyStore> key_store() const { return keys_; }

 private:
  void SetHealth(bool serving);
  // Health NOT_SERVING for good once the engine reports itself unhealthy
  // (repeated step failures, e.g. a device fault), so that an orchestrator
  // replaces this server.
  void OnEngineUnhealthy();
  // Reports a forward pass running past options_.step_watchdog, once per
  // stall, and restores health when it ends.
  void CheckStepWatchdog(double running_seconds);
  void StopServing(std::chrono::system_clock::time_point deadline);
  // The gRPC port: credentials, API keys, limits, health and reflection.
  absl::Status StartGrpc();
  absl::Status StartHttp();
  // Serves /metrics alone on --metrics-host:--metrics-port.
  absl::Status StartMetricsPort();
  absl::Status LoadKeys();

  ServerOptions options_;
  // Declared first so that it outlives the engine, which reports to it.
  Metrics metrics_;
  // Declared before the fronts, which hold pointers to it.
  std::unique_ptr<ServedChatRenderer> chat_;
  ServingState state_;
  ServiceEnv env_;  // shared by both fronts
  std::unique_ptr<tls::ServingTls> tls_;  // null: plain ports
  std::shared_ptr<auth::KeyStore> keys_;         // null: no keys
  std::unique_ptr<auth::Authenticator> auth_;  // used by both fronts
  std::unique_ptr<auth::KeyQueue> key_queue_;   // null: no per-key cap
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<http::HttpServer> http_;
  int http_port_ = 0;
  std::unique_ptr<http::HttpServer> metrics_http_;  // the metrics port
  int metrics_port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::mutex health_mu_;    // orders health changes with draining_
  bool draining_ = false;   // guarded by health_mu_
  bool unhealthy_ = false;  // guarded by health_mu_
  bool step_stalled_ = false;  // guarded by health_mu_
  std::mutex shutdown_mu_;  // serializes Drain and Shutdown
  bool stopped_ = false;    // guarded by shutdown_mu_
};

}  // namespace tessera::server
