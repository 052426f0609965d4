// What Generate and Complete have in common: turning a raw request into an
// engine request, and the call state shared between the gRPC reactor (which
// lives until OnDone) and the engine's sink calls (which may come later, on
// the engine thread). The engine holds the call through a shared_ptr, so the
// state outlives whichever side lets go last.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "server/auth/key_queue.h"
#include "server/metrics.h"
#include "server/serving_state.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::server {

// Server-wide state every call uses.
class ChatRenderer;
namespace auth {
class Authenticator;
}  // namespace auth

struct ServiceEnv {
  ServingState* state = nullptr;
  Metrics* metrics = nullptr;
  const ChatRenderer* chat = nullptr;  // the chat template; null: none
  const auth::Authenticator* auth = nullptr;  // API keys; null: none needed
  auth::KeyQueue* key_queue = nullptr;         // per-key queue cap; null: none
  std::atomic<uint64_t> next_request_id{1};
};

// A validated request, ready for the engine.
struct PreparedCall {
  std::shared_ptr<Engine> engine;
  GenerationRequest request;
  bool with_logprobs = false;
  std::string client_request_id;  // for logs
  auth::KeyQueue::Ticket queue_ticket;  // with a per-key cap: this request's place
};

// Parses, validates and tokenizes a GenerateRequest, and gives it a fresh id
// and the call's deadline. UNAVAILABLE while loading or draining.
absl::StatusOr<PreparedCall> PrepareCall(const grpc::CallbackServerContext& context,
                                         const grpc::ByteBuffer& raw, ServiceEnv& env);

// The same for a request already parsed (the HTTP front builds its own):
// validates and tokenizes it, gives it a fresh id, `arrival` and `deadline`.
// With a per-key cap, takes a queue ticket of the key named `key_name`
// (RESOURCE_EXHAUSTED when its queue is full).
absl::StatusOr<PreparedCall> PrepareRequest(const v1::GenerateRequest& proto,
                                            Clock::time_point arrival, Clock::time_point deadline,
                                            ServiceEnv& env, const std::string& key_name = "");

class EngineCall : public GenerationSink, public std::enable_shared_from_this<EngineCall> {
 public:
  EngineCall(const grpc::CallbackServerContext* context, Metrics* metrics);

  // Hands the request to the engine. On error the caller finishes the call
  // with the returned status; the engine will not call the sink.
  absl::Status Submit(PreparedCall prepared);

  // Reactor events, on gRPC threads.
  void OnCancel();
  void OnDone();

 protected:
  // Records the time since the previous token event (engine thread only).
  void RecordTokenEvent();
  // The status to end with, given how the engine finished; records metrics.
  // Requires mu_.
  grpc::Status FinishLocked(const FinishEvent& event);
  // The client is gone before gRPC reported a cancel (a write failed): the
  // engine's kCancelled then ends the call as CANCELLED (DEADLINE_EXCEEDED
  // when the call's deadline has passed: the transport cut the stream for
  // it), not as a success. Requires mu_.
  void ClientGoneLocked();

  const grpc::CallbackServerContext* const context_;
  Metrics* const metrics_;
  // Set by Submit before the engine sees the request; constant afterwards.
  const Tokenizer* tokenizer_ = nullptr;
  bool with_logprobs_ = false;
  uint64_t id_ = 0;

  std::mutex mu_;
  std::shared_ptr<Engine> engine_;             // guarded by mu_; released in OnDone
  bool submitted_ = false;                     // guarded by mu_
  bool engine_done_ = false;                   // guarded by mu_: OnFinish was called
  std::optional<grpc::Status> client_cancel_;  // guarded by mu_
  // Released at the first token or the end, whichever comes first.
  auth::KeyQueue::Ticket queue_ticket_;

 private:
  std::optional<Clock::time_point> last_token_event_;  // engine thread only
};

}  // namespace tessera::server
