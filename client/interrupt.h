// Turns SIGINT/SIGTERM into the cancellation of the call in flight.
//
// Signals are blocked in every thread (the mask is inherited by the threads
// gRPC starts, so construct this before creating a channel) and received by
// one watcher thread with sigwait, where calling ClientContext::TryCancel is
// safe: it is an ordinary thread, not a signal handler.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

#include <grpcpp/client_context.h>

namespace tessera::cli {

class InterruptWatcher {
 public:
  InterruptWatcher();
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  // The context to cancel on a signal; nullptr when no call is in flight.
  // When a signal arrived earlier, cancels `context` at once.
  void SetContext(grpc::ClientContext* context);

  bool interrupted() const { return interrupted_.load(); }

 private:
  void Run();

  std::atomic<bool> interrupted_{false};
  std::mutex mu_;
  grpc::ClientContext* context_ = nullptr;  // guarded by mu_
  std::thread thread_;
};

// Registers a context with the watcher for the lifetime of a call.
class ScopedCancellation {
 public:
  ScopedCancellation(InterruptWatcher& watcher, grpc::ClientContext* context)
      : watcher_(watcher) {
    watcher_.SetContext(context);
  }
  ~ScopedCancellation() { watcher_.SetContext(nullptr); }
  ScopedCancellation(const ScopedCancellation&) = delete;
  ScopedCancellation& operator=(const ScopedCancellation&) = delete;

 private:
  InterruptWatcher& watcher_;
};

}  // namespace tessera::cli
