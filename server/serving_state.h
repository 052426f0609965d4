// The engine once its model is loaded, and whether new generation requests
// are accepted. Shared by the server and every call; thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace tessera::server {

class ServingState {
 public:
  // The engine; UNAVAILABLE while the model loads.
  absl::StatusOr<std::shared_ptr<Engine>> GetEngine() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (engine_ == nullptr) return absl::UnavailableError("the model is still loading");
    return engine_;
  }

  // The engine for a new generation; UNAVAILABLE while the model loads or
  // once the server drains.
  absl::StatusOr<std::shared_ptr<Engine>> GetEngineForGeneration() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return absl::UnavailableError("the server is shutting down");
    if (engine_ == nullptr) return absl::UnavailableError("the model is still loading");
    return engine_;
  }

  void SetEngine(std::shared_ptr<Engine> engine) {
    std::lock_guard<std::mutex> lock(mu_);
    engine_ = std::move(engine);
  }

  // Refuses new generations from now on.
  void StartDraining() {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
  }

  // Removes the engine, handing its ownership to the caller.
  std::shared_ptr<Engine> TakeEngine() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(engine_, nullptr);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<Engine> engine_;  // guarded by mu_
  bool draining_ = false;           // guarded by mu_
};

}  // namespace tessera::server
