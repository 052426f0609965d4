#include "server/generate_reactor.h"

#include <optional>
#include <utility>
#include <vector>

#include "server/convert.h"
#include "server/status.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::server {
namespace {

// The engine's output for one Generate call, written to the client one
// message at a time. Token events that arrive while a write is in flight are
// merged into one pending message, so the engine never waits on the network
// and the queue never grows beyond one message.
class GenerateCall : public EngineCall {
 public:
  GenerateCall(grpc::ServerWriteReactor<grpc::ByteBuffer>* reactor,
               const grpc::CallbackServerContext* context, Metrics* metrics)
      : EngineCall(context, metrics), reactor_(reactor) {}

  void SetPromptIds(std::vector<int32_t> ids) { prompt_ids_ = std::move(ids); }

  void OnTokens(TokenEvent event) override {
    RecordTokenEvent();
    std::unique_lock<std::mutex> lock(mu_);
    if (stream_broken_) return;
    AppendTokens(event, with_logprobs_, *tokenizer_, &PendingLocked());
    PumpLocked(lock);
  }

  void OnFinish(FinishEvent event) override {
    std::unique_lock<std::mutex> lock(mu_);
    final_status_ = FinishLocked(event);
    if (final_status_.ok() && !stream_broken_) SetFinish(event, &PendingLocked());
    PumpLocked(lock);
  }

  void OnWriteDone(bool ok) {
    Engine* cancel = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_in_flight_ = false;
      if (!ok && !stream_broken_) {
        // The client is gone: stop generating and drop what is pending.
        stream_broken_ = true;
        pending_.reset();
        ClientGoneLocked();
        if (submitted_ && !engine_done_) cancel = engine_.get();
      }
    }
    // gRPC runs OnDone (which releases engine_) only after this reaction
    // returns, so the engine is still held.
    if (cancel != nullptr) cancel->Cancel(id_);
    std::unique_lock<std::mutex> lock(mu_);
    PumpLocked(lock);
  }

 private:
  // The message being assembled; the first one carries the prompt ids.
  v1::GenerateResponse& PendingLocked() {
    if (!pending_) {
      pending_.emplace();
      if (!prompt_ids_sent_) {
        pending_->mutable_prompt_token_ids()->Add(prompt_ids_.begin(), prompt_ids_.end());
        prompt_ids_sent_ = true;
      }
    }
    return *pending_;
  }

  // Starts the next write, or finishes the call, unless a write is in flight.
  // Reactor methods are called after unlocking; once `finishing_` is set no
  // one touches the reactor again (it may be deleted in OnDone).
  void PumpLocked(std::unique_lock<std::mutex>& lock) {
    if (finishing_ || write_in_flight_) return;
    if (stream_broken_ || (engine_done_ && !final_status_.ok())) {
      // Wait until the engine is done with the request before ending.
      if (!engine_done_) return;
      finishing_ = true;
      grpc::Status status = final_status_.ok()
                                ? grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke")
                                : final_status_;
      lock.unlock();
      reactor_->Finish(status);
      return;
    }
    if (!pending_) return;
    write_buffer_ = SerializeMessage(*pending_);
    pending_.reset();
    if (engine_done_) {
      finishing_ = true;
      lock.unlock();
      reactor_->StartWriteAndFinish(&write_buffer_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      write_in_flight_ = true;
      lock.unlock();
      reactor_->StartWrite(&write_buffer_);
    }
  }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* const reactor_;
  std::vector<int32_t> prompt_ids_;  // set before Submit; constant afterwards

  std::optional<v1::GenerateResponse> pending_;  // guarded by mu_
  grpc::ByteBuffer write_buffer_;                // guarded by mu_ unless a write is in flight
  grpc::Status final_status_;                    // guarded by mu_; valid once engine_done_
  bool prompt_ids_sent_ = false;                 // guarded by mu_
  bool write_in_flight_ = false;                 // guarded by mu_
  bool stream_broken_ = false;                   // guarded by mu_
  bool finishing_ = false;                       // guarded by mu_
};

class GenerateReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  GenerateReactor(const grpc::CallbackServerContext* context, Metrics* metrics)
      : call_(std::make_shared<GenerateCall>(this, context, metrics)) {}

  GenerateCall& call() { return *call_; }

  void OnWriteDone(bool ok) override { call_->OnWriteDone(ok); }
  void OnCancel() override { call_->OnCancel(); }
  void OnDone() override {
    call_->OnDone();
    delete this;
  }

 private:
  std::shared_ptr<GenerateCall> call_;
};

// Accumulates the engine's output into one CompleteResponse.
class CompleteCall : public EngineCall {
 public:
  CompleteCall(grpc::ServerUnaryReactor* reactor, const grpc::CallbackServerContext* context,
               grpc::ByteBuffer* response, Metrics* metrics)
      : EngineCall(context, metrics), reactor_(reactor), response_buffer_(response) {}

  void SetPromptIds(const std::vector<int32_t>& ids) {
    response_.mutable_prompt_token_ids()->Add(ids.begin(), ids.end());
  }

  void OnTokens(TokenEvent event) override {
    RecordTokenEvent();
    std::lock_guard<std::mutex> lock(mu_);
    AppendTokens(event, with_logprobs_, *tokenizer_, &response_);
  }

  void OnFinish(FinishEvent event) override {
    grpc::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status = FinishLocked(event);
      if (status.ok()) {
        SetFinish(event, &response_);
        // gRPC owns the buffer until OnDone, which comes after Finish.
        *response_buffer_ = SerializeMessage(response_);
      }
    }
    reactor_->Finish(status);
  }

 private:
  grpc::ServerUnaryReactor* const reactor_;
  grpc::ByteBuffer* const response_buffer_;
  v1::CompleteResponse response_;  // guarded by mu_
};

class CompleteReactor : public grpc::ServerUnaryReactor {
 public:
  CompleteReactor(const grpc::CallbackServerContext* context, grpc::ByteBuffer* response,
                  Metrics* metrics)
      : call_(std::make_shared<CompleteCall>(this, context, response, metrics)) {}

  CompleteCall& call() { return *call_; }

  void OnCancel() override { call_->OnCancel(); }
  void OnDone() override {
    call_->OnDone();
    delete this;
  }

 private:
  std::shared_ptr<CompleteCall> call_;
};

// Prepares and submits the request; returns the status to finish the call
// with at once when it was refused.
template <typename Call>
absl::Status PrepareAndSubmit(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw,
                              ServiceEnv& env, Call& call) {
  absl::StatusOr<PreparedCall> prepared = PrepareCall(*context, raw, env);
  absl::Status status = prepared.status();
  if (status.ok()) {
    call.SetPromptIds(prepared->request.prompt_ids);
    status = call.Submit(*std::move(prepared));
  }
  status = CancelledIfGone(*context, status);
  if (!status.ok()) env.metrics->RecordFailure(ToGrpcCode(status.code()));
  return status;
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* StartGenerate(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer& request,
                                                          ServiceEnv& env) {
  auto* reactor = new GenerateReactor(context, env.metrics);
  absl::Status status = PrepareAndSubmit(context, request, env, reactor->call());
  if (!status.ok()) reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* StartComplete(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
                                        ServiceEnv& env) {
  auto* reactor = new CompleteReactor(context, response, env.metrics);
  absl::Status status = PrepareAndSubmit(context, request, env, reactor->call());
  if (!status.ok()) reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace tessera::server
