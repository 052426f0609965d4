#include "server/server.h"

#include <algorithm>
#include <ctime>
#include <thread>
#include <optional>
#include <string>
#include <utility>

#include <google/protobuf/stubs/logging.h>
#include <grpc/compression.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/auth/authenticator.h"
#include "server/auth/grpc_auth.h"
#include "server/grpc_limits.h"
#include "server/http/http_server.h"
#include "server/service.h"
#include "server/tls/serving_tls.h"
#include "server/template_chat_renderer.h"

namespace tessera::server {
namespace {

constexpr char kServiceName[] = "tessera.v1.Inference";
// The HPACK limit on one call's headers (see Start).
constexpr int kMaxConnectionMetadataBytes = 4 << 20;
// How often the engine gauges are refreshed.
constexpr std::chrono::milliseconds kStatsPeriod{250};
// Time for responses already produced to reach their clients once the
// engine is idle: at most kFlushGrace of what is left of the drain timeout,
// and at least kMinFlushGrace.
constexpr std::chrono::milliseconds kFlushGrace{2000};
constexpr std::chrono::milliseconds kMinFlushGrace{500};
// The metrics port: how long a connection may wait before sending its
// request, and then to send it whole.
constexpr std::chrono::milliseconds kMetricsIdleTimeout{2000};
constexpr std::chrono::milliseconds kMetricsHeaderTimeout{2000};

std::string JoinHostPort(const std::string& host, int port) {
  // IPv6 literals need brackets.
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

// How a port's log line names its security: nothing without TLS.
const char* TlsSuffix(const tls::ServingTls* tls, bool https) {
  if (tls == nullptr) return "";
  if (!https) return tls->mutual ? " (mutual TLS)" : " (TLS)";
  return tls->mutual ? " (HTTPS, mutual TLS)" : " (HTTPS)";
}

void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  if (level >= google::protobuf::LOGLEVEL_FATAL) {
    spdlog::critical("protobuf {}:{}: {}", file, line, message);
    return;
  }
  spdlog::debug("protobuf {}:{}: {}", file, line, message);
}

}  // namespace

Server::Server() = default;

Server::~Server() { Shutdown(); }

absl::Status Server::Start(const ServerOptions& options, const ChatRenderer* chat) {
  options_ = options;
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  // protobuf logs each invalid request it parses (invalid UTF-8 in a string
  // field, for one) as an error, which any client could repeat to flood the
  // log: those requests are refused with INVALID_ARGUMENT, so debug is enough.
  google::protobuf::SetLogHandler(&ProtobufLog);
  env_.state = &state_;
  env_.metrics = &metrics_;
  chat_ = std::make_unique<ServedChatRenderer>(chat);
  env_.chat = chat_.get();
  if (options.metrics_tls && !options.tls.enabled()) {
    return absl::InvalidArgumentError("--metrics-tls needs --tls-cert and --tls-key");
  }
  if (absl::Status status = LoadKeys(); !status.ok()) return status;
  if (absl::Status status = StartGrpc(); !status.ok()) return status;
  for (auto [port, start] : {std::pair{options.metrics_port, &Server::StartMetricsPort},
                             std::pair{options.http_port, &Server::StartHttp}}) {
    if (port == 0) continue;
    if (absl::Status status = (this->*start)(); !status.ok()) {
      Shutdown();
      return status;
    }
  }
  metrics_.StartStatsUpdates(
      [this]() -> std::optional<EngineStats> {
        absl::StatusOr<std::shared_ptr<Engine>> engine = state_.GetEngine();
        if (!engine.ok()) return std::nullopt;
        EngineStats stats = (*engine)->Stats();
        if (!stats.healthy) OnEngineUnhealthy();
        CheckStepWatchdog(stats.step_running_seconds);
        return stats;
      },
      kStatsPeriod);
  return absl::OkStatus();
}

absl::Status Server::StartGrpc() {
  const ServerOptions& options = options_;
  service_ = std::make_unique<InferenceService>(&env_);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls.enabled()) {
    absl::StatusOr<std::unique_ptr<tls::ServingTls>> tls = tls::StartServingTls(options.tls);
    if (!tls.ok()) return tls.status();
    tls_ = *std::move(tls);
    credentials = tls_->grpc;
  }
  grpc::ServerBuilder builder;
  const std::string address = JoinHostPort(options.host, options.port);
  if (auth_ != nullptr) {
    auto processor = std::make_shared<auth::GrpcKeyProcessor>(auth_.get(), !options.auth_health);
    if (tls_ != nullptr) {
      credentials->SetAuthMetadataProcessor(processor);
    } else {
      credentials = auth::InsecureCredentialsWithProcessor(processor);
    }
  }
  builder.AddListeningPort(address, credentials, &port_);
  builder.RegisterService(service_.get());
  // gRPC ends a whole connection (every stream on it) when one call's
  // headers exceed this, so it is set far above the per-call limit that the
  // service enforces itself (kMaxRequestMetadataBytes), which fails that
  // call alone.
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxConnectionMetadataBytes);
  // No compressed requests: gRPC 1.51 inflates a whole message before it
  // checks the size limit, so a 256 KiB gzip bomb would cost 256 MiB and
  // seconds of CPU, on health checks too, which need no key. A compressed
  // call gets UNIMPLEMENTED before its message is read. (Requests are small
  // next to what generating them costs; responses are sent uncompressed.)
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  ApplyGrpcLimits(options.grpc, builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", address));
  }
  SetHealth(false);
  spdlog::info("serving gRPC on {}{}", JoinHostPort(options.host, port_),
               TlsSuffix(tls_.get(), false));
  return absl::OkStatus();
}

absl::Status Server::LoadKeys() {
  if (options_.api_key_file.empty()) {
    if (options_.max_queued_requests_per_key == 0) return absl::OkStatus();
    return absl::InvalidArgumentError("--max-queued-requests-per-key needs --api-key-file");
  }
  absl::StatusOr<std::shared_ptr<auth::KeyStore>> keys = auth::KeyStore::Load(options_.api_key_file);
  if (!keys.ok()) return keys.status();
  keys_ = *std::move(keys);
  auth_ = std::make_unique<auth::Authenticator>(keys_, &metrics_);
  env_.auth = auth_.get();
  if (options_.max_queued_requests_per_key > 0) {
    key_queue_ = std::make_unique<auth::KeyQueue>(options_.max_queued_requests_per_key);
    env_.key_queue = key_queue_.get();
  }
  spdlog::info("API keys required: {} key(s) from {}{}", keys_->size(), options_.api_key_file,
               options_.auth_health ? " (health checks too)" : "");
  return absl::OkStatus();
}

absl::Status Server::StartHttp() {
  http::HttpEnv env;
  env.service = &env_;
  env.chat = chat_.get();
  env.auth = auth_.get();
  env.auth_health = options_.auth_health;
  env.max_body_bytes = options_.http_max_body_bytes;
  env.header_timeout = options_.http_header_timeout;
  env.idle_timeout = options_.http_idle_timeout;
  env.started_at = static_cast<int64_t>(std::time(nullptr));
  http_ = std::make_unique<http::HttpServer>(std::move(env));
  if (tls_ != nullptr) http_->UseTls(tls_->http);
  const int port = options_.http_port == kAnyFreePort ? 0 : options_.http_port;
  // A few I/O threads serve every connection; the engine thread does the work.
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 4, 1, 4);
  absl::Status status = http_->Start(options_.host, port, threads);
  if (!status.ok()) {
    http_.reset();
    return status;
  }
  http_port_ = http_->port();
  spdlog::info("serving the OpenAI-compatible HTTP API on {}{}",
               JoinHostPort(options_.host, http_port_), TlsSuffix(tls_.get(), true));
  return absl::OkStatus();
}

absl::Status Server::StartMetricsPort() {
  http::HttpEnv env;
  env.surface = http::Surface::kMetricsOnly;
  env.service = &env_;
  // A scrape is one small GET: a short wait for it and no body; a connection
  // without a request for 2 s is closed. Connections cost no thread (the
  // server is asynchronous), so idle or slow ones cannot hold a scrape back.
  env.max_body_bytes = 0;
  env.header_timeout = kMetricsHeaderTimeout;
  env.idle_timeout = kMetricsIdleTimeout;
  metrics_http_ = std::make_unique<http::HttpServer>(std::move(env));
  if (options_.metrics_tls) metrics_http_->UseTls(tls_->http);
  const int port = options_.metrics_port == kAnyFreePort ? 0 : options_.metrics_port;
  const std::string& host = options_.metrics_host.empty() ? options_.host : options_.metrics_host;
  absl::Status status = metrics_http_->Start(host, port, /*threads=*/1);
  if (!status.ok()) {
    metrics_http_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics: ", status.message()));
  }
  metrics_port_ = metrics_http_->port();
  spdlog::info("serving metrics on {}/metrics{}", JoinHostPort(host, metrics_port_),
               TlsSuffix(options_.metrics_tls ? tls_.get() : nullptr, true));
  return absl::OkStatus();
}

absl::Status Server::LoadModel() {
  spdlog::info("loading model {}", options_.engine.model_path);
  absl::StatusOr<std::unique_ptr<Engine>> created = Engine::Create(options_.engine, &metrics_);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("cannot load model '", options_.engine.model_path,
                                     "': ", created.status().message()));
  }
  std::shared_ptr<Engine> engine = *std::move(created);
  const ModelInfo& info = engine->model_info();
  if (!info.chat_template.empty()) {
    auto renderer = TemplateChatRenderer::Create(info.chat_template, engine->tokenizer());
    if (!renderer.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot load model '",
                                                     options_.engine.model_path,
                                                     "': ", renderer.status().message()));
    }
    chat_->SetModelRenderer(*std::move(renderer));
  }
  spdlog::info("loaded {} ({}, {} layers, vocab {}, context {}) on {}", info.name,
               info.architecture, info.num_layers, info.vocab_size, info.context_length,
               info.device);
  state_.SetEngine(engine);
  std::lock_guard<std::mutex> lock(health_mu_);
  if (draining_) {
    engine->StopAccepting();
  } else if (!unhealthy_) {
    SetHealth(true);
  }
  return absl::OkStatus();
}

void Server::OnEngineUnhealthy() {
  std::lock_guard<std::mutex> lock(health_mu_);
  if (unhealthy_) return;
  unhealthy_ = true;
  spdlog::error("the engine is unhealthy: health is NOT_SERVING from now on");
  SetHealth(false);
}

void Server::CheckStepWatchdog(double running_seconds) {
  const double limit = options_.step_watchdog.count() / 1000.0;
  const bool stalled = limit > 0 && running_seconds > limit;
  std::lock_guard<std::mutex> lock(health_mu_);
  if (stalled == step_stalled_) return;
  step_stalled_ = stalled;
  if (stalled) {
    spdlog::error("an engine step has run for {:.1f} s, past the step watchdog's {:.1f} s: the "
                  "engine may be stuck; health is NOT_SERVING until the step ends",
                  running_seconds, limit);
    metrics_.RecordStalledStep();
    SetHealth(false);
    return;
  }
  spdlog::warn("the stalled engine step ended");
  if (!draining_ && !unhealthy_) SetHealth(true);
}

void Server::BeginDrain() {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    if (draining_) return;
    draining_ = true;
    SetHealth(false);
  }
  state_.StartDraining();
  if (absl::StatusOr<std::shared_ptr<Engine>> engine = state_.GetEngine(); engine.ok()) {
    spdlog::info("draining: refusing new requests");
    (*engine)->StopAccepting();
  }
}

bool Server::Drain(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  BeginDrain();
  bool idle = true;
  absl::StatusOr<std::shared_ptr<Engine>> engine = state_.GetEngine();
  if (engine.ok()) idle = (*engine)->WaitIdle(timeout);
  if (!idle) {
    // The engine finishes what still runs as cancelled: each stream gets a
    // last message with FINISH_REASON_CANCELLED before the server stops.
    spdlog::warn("drain timeout passed; cancelling the remaining requests");
    (*engine)->Shutdown();
  }
  // Every request has finished in the engine now: what remains is writing
  // the last responses, which needs a moment, not the rest of the timeout
  // (an idle connection would otherwise hold the exit back).
  const auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - start);
  StopServing(std::chrono::system_clock::now() + std::clamp(left, kMinFlushGrace, kFlushGrace));
  return idle;
}

void Server::Shutdown() { StopServing(std::chrono::system_clock::now()); }

std::shared_ptr<Engine> Server::engine() const {
  absl::StatusOr<std::shared_ptr<Engine>> engine = state_.GetEngine();
  return engine.ok() ? *engine : nullptr;
}

void Server::SetHealth(bool serving) {
  if (server_ == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus("", serving);
  health->SetServingStatus(kServiceName, serving);
}

void Server::StopServing(std::chrono::system_clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (stopped_) return;
  stopped_ = true;
  BeginDrain();
  // The gRPC server goes first: its calls may still need the engine to
  // finish (a cancelled call waits for the engine's last event).
  if (server_ != nullptr) {
    server_->Shutdown(deadline);
    server_->Wait();
  }
  // The HTTP front stops its I/O next (giving responses the same grace);
  // its connections go after the engine, which may still report to them.
  if (http_ != nullptr) {
    const auto left = deadline - std::chrono::system_clock::now();
    http_->Stop(std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::max(left, decltype(left)::zero())));
  }
  metrics_.StopStatsUpdates();
  if (std::shared_ptr<Engine> engine = state_.TakeEngine()) engine->Shutdown();
  http_.reset();
  // /metrics answers until here, through the drain.
  metrics_http_.reset();
  spdlog::info("server stopped");
}

}  // namespace tessera::server
