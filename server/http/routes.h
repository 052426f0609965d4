// What the HTTP front answers, apart from the network: immediate replies
// (models, health, metrics, apply-template, errors) and the start of a
// generation (parse, validate, render a chat, submit n engine requests).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "server/chat_renderer.h"
#include "server/engine_call.h"
#include "server/http/generation.h"

namespace tessera::server::auth {
class Authenticator;
}  // namespace tessera::server::auth

namespace tessera::server::http {

// What a port serves: the API (OpenAI routes, /health, /metrics), or only
// /metrics, without a key (the --metrics-port front, for Prometheus).
enum class Surface { kApi, kMetricsOnly };

// Server-wide settings and state every connection uses.
struct HttpEnv {
  Surface surface = Surface::kApi;
  ServiceEnv* service = nullptr;
  const ChatRenderer* chat = nullptr;  // null: chat endpoints answer 400
  int64_t max_body_bytes = int64_t{8} << 20;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds write_timeout{30000};
  int64_t started_at = 0;  // Unix seconds, for /v1/models
  // Every route but /health needs a key (and /health too with auth_health);
  // null: no key is needed.
  const auth::Authenticator* auth = nullptr;
  bool auth_health = false;
};

// A request as routing needs it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  std::string content_type;
  std::string body;
  std::optional<std::string> authorization;  // the Authorization header
  std::optional<std::string> api_key;        // the X-Api-Key header
};

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string allow;  // the Allow header of a 405
};

// A generation handed to the engine; the session streams or collects it.
struct StartedGeneration {
  std::shared_ptr<Engine> engine;
  std::vector<uint64_t> ids;  // the engine requests, one per choice
  std::unique_ptr<Generation> generation;
  std::shared_ptr<std::atomic<bool>> client_gone;  // set before cancelling
  bool stream = false;
};

using RouteResult = std::variant<Reply, StartedGeneration>;

// Answers `request`; generations report to `target`.
RouteResult Route(const HttpRequest& request, HttpEnv& env, std::weak_ptr<ChoiceTarget> target);

Reply ErrorReply(const HttpError& error);

}  // namespace tessera::server::http
