#include "client/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

namespace tessera::cli {
namespace {

// SIGUSR1 is only ever sent by the destructor, to end the watcher.
sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

InterruptWatcher::InterruptWatcher() {
  const sigset_t set = WatchedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this] { Run(); });
}

InterruptWatcher::~InterruptWatcher() {
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

void InterruptWatcher::SetContext(grpc::ClientContext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  context_ = context;
  if (context_ != nullptr && interrupted_.load()) context_->TryCancel();
}

void InterruptWatcher::Run() {
  const sigset_t set = WatchedSignals();
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0 || signal == SIGUSR1) return;
    // A second signal means the cancelled call is not ending: give up.
    if (interrupted_.exchange(true)) _exit(130);
    std::lock_guard<std::mutex> lock(mu_);
    if (context_ != nullptr) context_->TryCancel();
  }
}

}  // namespace tessera::cli
