// tessera-cli tokenize, detokenize and info.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/commands.h"
#include "health.grpc.pb.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::cli {
namespace {

namespace pb = ::tessera::v1;
namespace health = ::grpc::health::v1;
using Json = nlohmann::ordered_json;
using SteadyClock = std::chrono::steady_clock;

void PrintJson(const Json& j) {
  // Pieces may be part of a UTF-8 character: replace, never throw.
  std::printf("%s\n", j.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
}

// A string as a JSON literal, so that spaces and control bytes are visible.
std::string Quoted(const std::string& s) {
  return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Runs a unary call with the --timeout deadline and Ctrl-C cancellation.
template <typename Call>
grpc::Status Unary(const Session& session, Call call) {
  grpc::ClientContext context;
  ApplyCallOptions(session.options, context);
  ScopedCancellation cancel(*session.interrupts, &context);
  return call(&context);
}

}  // namespace

int RunTokenize(const Session& session) {
  const TokenizeOptions& t = session.options.tokenize;
  auto stub = pb::Inference::NewStub(session.channel);
  pb::TokenizeRequest req;
  req.set_text(t.text);
  if (t.add_bos) req.set_add_bos(*t.add_bos);
  pb::TokenizeResponse resp;
  grpc::Status status = Unary(session, [&](grpc::ClientContext* c) {
    return stub->Tokenize(c, req, &resp);
  });
  if (!status.ok()) return ReportRpcFailure(session, status);
  if (session.options.json) {
    PrintJson({{"token_ids", std::vector<int32_t>(resp.token_ids().begin(), resp.token_ids().end())},
               {"pieces", std::vector<std::string>(resp.pieces().begin(), resp.pieces().end())}});
    return kExitOk;
  }
  for (int i = 0; i < resp.token_ids_size(); ++i) {
    const std::string piece = i < resp.pieces_size() ? Quoted(resp.pieces(i)) : "";
    std::printf("%d\t%s\n", resp.token_ids(i), piece.c_str());
  }
  return kExitOk;
}

int RunDetokenize(const Session& session) {
  auto stub = pb::Inference::NewStub(session.channel);
  pb::DetokenizeRequest req;
  for (int32_t id : session.options.detokenize_ids) req.add_token_ids(id);
  pb::DetokenizeResponse resp;
  grpc::Status status = Unary(session, [&](grpc::ClientContext* c) {
    return stub->Detokenize(c, req, &resp);
  });
  if (!status.ok()) return ReportRpcFailure(session, status);
  if (session.options.json) {
    PrintJson({{"text", resp.text()}});
  } else {
    std::printf("%s\n", resp.text().c_str());
  }
  return kExitOk;
}

namespace {

struct HealthResult {
  grpc::Status status;  // of the last Check
  health::HealthCheckResponse::ServingStatus serving = health::HealthCheckResponse::UNKNOWN;
  // The server has no health service: GetModelInfo decides instead.
  bool unimplemented = false;
  std::shared_ptr<grpc::Channel> channel;  // the channel of the last Check
};

// Calls Check until the server reports SERVING, `wait_seconds` pass, or the
// user interrupts. Without waiting, calls it once.
HealthResult WaitForServing(const Session& session) {
  HealthResult result;
  result.channel = session.channel;
  auto stub = health::Health::NewStub(result.channel);
  const auto end = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                            std::chrono::duration<double>(session.options.wait_seconds));
  for (;;) {
    health::HealthCheckRequest req;  // service "": the whole server
    health::HealthCheckResponse resp;
    result.status = Unary(session, [&](grpc::ClientContext* c) {
      // Each try must leave time for the next one before `end`.
      if (session.options.timeout_seconds <= 0) {
        c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      }
      return stub->Check(c, req, &resp);
    });
    result.serving = resp.status();
    if (result.status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      result.unimplemented = true;
      return result;
    }
    if (result.status.ok() && result.serving == health::HealthCheckResponse::SERVING) return result;
    // gRPC 1.51's TLS channels do not recover once a connection attempt was
    // refused (the handshake never starts): retry on a new channel.
    if (!result.status.ok() && session.options.tls.enabled()) {
      if (auto channel = MakeChannel(session.options.server, session.options.tls)) {
        result.channel = channel;
        stub = health::Health::NewStub(channel);
      }
    }
    // Wait a little before the next try, in slices so Ctrl-C stays prompt.
    const auto next = std::min(end, SteadyClock::now() + std::chrono::milliseconds(250));
    while (SteadyClock::now() < next && !session.interrupts->interrupted()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (SteadyClock::now() >= end || session.interrupts->interrupted()) return result;
  }
}

Json InfoJson(const pb::GetModelInfoResponse& m) {
  return {
      {"model_name", m.model_name()},
      {"architecture", m.architecture()},
      {"tokenizer", m.tokenizer()},
      {"vocab_size", m.vocab_size()},
      {"context_length", m.context_length()},
      {"embedding_dim", m.embedding_dim()},
      {"num_layers", m.num_layers()},
      {"num_heads", m.num_heads()},
      {"num_kv_heads", m.num_kv_heads()},
      {"num_parameters", m.num_parameters()},
      {"device", m.device()},
      {"weight_dtype", m.weight_dtype()},
      {"bos_token_id", m.bos_token_id()},
      {"eos_token_id", m.eos_token_id()},
      {"requests_running", m.requests_running()},
      {"requests_waiting", m.requests_waiting()},
      {"kv_cache_usage_ratio", m.kv_cache_usage_ratio()},
      {"kv_cache_cached_blocks", m.kv_cache_cached_blocks()},
      {"kv_cache_blocks", m.kv_cache_blocks()},
      {"prefix_caching", m.prefix_caching()},
      {"scheduling_policy", m.scheduling_policy()},
      {"server_version", m.server_version()},
      {"model_format", m.model_format()},
      {"rope_scaling", m.rope_scaling()},
      {"rope_freq_base", m.rope_freq_base()},
      {"rope_scaling_factor", m.rope_scaling_factor()},
      {"sliding_window", m.sliding_window()},
      {"sliding_window_layers",
       std::vector<int32_t>(m.sliding_window_layers().begin(), m.sliding_window_layers().end())},
      {"rope_freq_base_sliding", m.rope_freq_base_sliding()},
  };
}

void PrintInfoText(const std::string& server, const Json& info) {
  std::printf("%-22s %s\n", "server:", server.c_str());
  std::printf("%-22s %s\n", "health:", info.value("health", "").c_str());
  for (const auto& [key, value] : info.items()) {
    if (key == "health" || key == "server") continue;
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    std::printf("%-22s %s\n", (key + ":").c_str(), text.c_str());
  }
}

}  // namespace

int RunInfo(const Session& session) {
  HealthResult health = WaitForServing(session);
  if (session.interrupts->interrupted()) return ReportRpcFailure(session, health.status);
  if (!health.unimplemented && !health.status.ok()) return ReportRpcFailure(session, health.status);
  if (!health.unimplemented && health.serving != health::HealthCheckResponse::SERVING) {
    std::fprintf(stderr, "tessera-cli: server at %s is not serving (%s)\n",
                 session.options.server.c_str(),
                 health::HealthCheckResponse::ServingStatus_Name(health.serving).c_str());
    return kExitFailure;
  }
  auto stub = pb::Inference::NewStub(health.channel);
  pb::GetModelInfoResponse info;
  grpc::Status status = Unary(session, [&](grpc::ClientContext* c) {
    return stub->GetModelInfo(c, pb::GetModelInfoRequest(), &info);
  });
  if (!status.ok()) return ReportRpcFailure(session, status);
  Json j = InfoJson(info);
  j["server"] = session.options.server;
  j["health"] = health.unimplemented ? "SERVING (no health service)" : "SERVING";
  if (session.options.json) {
    PrintJson(j);
  } else {
    PrintInfoText(session.options.server, j);
  }
  return kExitOk;
}

}  // namespace tessera::cli
