#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "server/run.h"

#include "server/auth/key_store.h"
#include "server/flags.h"
#include "server/server.h"

namespace {

// How long past the drain deadline a shutdown may take before the process
// ends itself: a stuck engine step would otherwise keep it alive for good.
constexpr std::chrono::seconds kForcedExitGrace{15};
constexpr int kForcedExitCode = 3;

// Ends the process if it is still running `after` from now.
void StartForcedExitTimer(std::chrono::milliseconds after) {
  std::thread([after] {
    std::this_thread::sleep_for(after);
    spdlog::critical("shutdown still unfinished {} ms after the signal (an engine step is "
                     "stuck?): exiting now", after.count());
    spdlog::shutdown();
    std::fflush(nullptr);
    std::_Exit(kForcedExitCode);
  }).detach();
}

// Tests only: TESSERA_TESTING_STALL_FIRST_STEP_MS makes the first engine
// step sleep, as a step stuck in a kernel would;
// TESSERA_TESTING_STEP_DELAY_MS makes every step sleep (a slow model).
void ApplyTestingEnvironment(tessera::server::ServerOptions& options) {
  if (const char* ms = std::getenv("TESSERA_TESTING_STALL_FIRST_STEP_MS")) {
    options.engine.stall_first_step_for_testing_ms = std::atoi(ms);
  }
  if (const char* ms = std::getenv("TESSERA_TESTING_STEP_DELAY_MS")) {
    options.engine.step_delay_for_testing_ms = std::atoi(ms);
  }
}

// SIGINT, SIGTERM and SIGHUP are blocked in every thread and taken by one
// thread with sigwait, so that handling them needs no async-signal-safe code.
sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// What SIGHUP reloads: the API keys, once the server has them. Shared with
// the signal thread, which may outlive Run.
struct ReloadTarget {
  std::mutex mu;
  std::shared_ptr<tessera::server::auth::KeyStore> keys;  // guarded by mu
};

// SIGHUP: re-reads the key file; a bad file keeps the keys in force.
void ReloadKeys(ReloadTarget& target) {
  std::lock_guard<std::mutex> lock(target.mu);
  if (target.keys == nullptr) {
    spdlog::warn("SIGHUP: no --api-key-file to reload");
    return;
  }
  absl::Status status = target.keys->Reload();
  if (status.ok()) {
    spdlog::info("SIGHUP: reloaded {} API key(s) from {}", target.keys->size(), target.keys->path());
  } else {
    spdlog::error("SIGHUP: keeping the {} API key(s) in force: {}", target.keys->size(),
                  std::string(status.message()));
  }
}

// Handles SIGHUP until the first SIGINT or SIGTERM, which fulfils `first`.
// Later signals stay blocked and pending: a signal sent to the whole process
// group (and again by a parent such as timeout) must not cut the drain short.
void WaitForSignal(std::promise<int> first, std::shared_ptr<ReloadTarget> reload) {
  const sigset_t set = HandledSignals();
  int signal = 0;
  while (true) {
    if (sigwait(&set, &signal) != 0) signal = SIGTERM;
    if (signal != SIGHUP) break;
    ReloadKeys(*reload);
  }
  first.set_value(signal);
}

int Run(tessera::server::ServerOptions options, const tessera::server::ChatRenderer* chat) {
  ApplyTestingEnvironment(options);
  const sigset_t signals = HandledSignals();
  // Before any thread starts, so that every thread inherits the mask.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::promise<int> signal_promise;
  std::future<int> signal_future = signal_promise.get_future();
  auto reload = std::make_shared<ReloadTarget>();
  std::thread(WaitForSignal, std::move(signal_promise), reload).detach();

  tessera::server::Server server;
  absl::Status status = server.Start(options, chat);
  if (!status.ok()) {
    spdlog::critical("{}", std::string(status.message()));
    return 1;
  }
  {
    std::lock_guard<std::mutex> lock(reload->mu);
    reload->keys = server.key_store();
  }
  status = server.LoadModel();
  if (!status.ok()) {
    spdlog::critical("{}", std::string(status.message()));
    server.Shutdown();
    return 1;
  }
  spdlog::info("ready");
  const int signal = signal_future.get();
  spdlog::info("signal {}: draining for up to {} ms", signal, options.drain_timeout.count());
  StartForcedExitTimer(options.drain_timeout + kForcedExitGrace);
  const bool idle = server.Drain(options.drain_timeout);
  spdlog::info(idle ? "drained" : "drain timed out");
  return 0;
}

}  // namespace

namespace tessera::server {

int ServerMain(int argc, char** argv, const ChatRenderer* chat) {
  absl::StatusOr<tessera::server::ParsedFlags> parsed =
      tessera::server::ParseFlags(argc, argv, tessera::server::GetEnv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "tessera-server: %s\nRun %s --help for the flags.\n",
                 std::string(parsed.status().message()).c_str(), argv[0]);
    return 2;
  }
  if (parsed->help) {
    std::fputs(tessera::server::FlagsHelp(argv[0]).c_str(), stdout);
    return 0;
  }
  return Run(parsed->options, chat);
}

}  // namespace tessera::server
