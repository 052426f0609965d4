// One streamed Generate call of the benchmark, driven by gRPC's callback API
// so that many calls share gRPC's few threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include <grpcpp/grpcpp.h>

#include "client/bench/timeline.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::bench {

// One benchmark request in flight, whatever the protocol.
class BenchCall {
 public:
  virtual ~BenchCall() = default;
  virtual void Start() = 0;
  // Asks the call to end early; it still reports to the observer.
  virtual void Cancel() = 0;
};

// Told about a call's end. Both methods run on a client library thread.
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  // The call is about to be destroyed: it must no longer be cancelled.
  virtual void Detach(BenchCall* call) = 0;
  // The call's measurements, after it was destroyed.
  virtual void Finished(RequestRecord record) = 0;
};

// Owns itself from Start() until its final status, then deletes itself.
class GenerateCall final : public grpc::ClientReadReactor<tessera::v1::GenerateResponse>,
                           public BenchCall {
 public:
  // `tokens_received` counts streamed tokens across calls, for progress.
  GenerateCall(tessera::v1::Inference::Stub* stub, tessera::v1::GenerateRequest request,
               int64_t index, double timeout_seconds, std::atomic<int64_t>* tokens_received,
               CallObserver* observer);

  // Sends `api_key` as "authorization: Bearer KEY"; before Start.
  void SetApiKey(const std::string& api_key) {
    if (!api_key.empty()) context_.AddMetadata("authorization", "Bearer " + api_key);
  }
  void Start() override;
  void Cancel() override { context_.TryCancel(); }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  double SecondsSinceSend() const;

  tessera::v1::Inference::Stub* stub_;
  tessera::v1::GenerateRequest request_;
  tessera::v1::GenerateResponse response_;
  grpc::ClientContext context_;
  std::chrono::steady_clock::time_point sent_;
  std::atomic<int64_t>* tokens_received_;
  CallObserver* observer_;
  TokenTimeline timeline_;
  RequestRecord record_;
};

}  // namespace tessera::bench
