// tessera-cli: command-line client of a Tessera inference server.
#include <cstdio>
#include <string>
#include <vector>

#include "client/cli_args.h"
#include "client/commands.h"
#include "client/interrupt.h"
#include "client/session.h"

int main(int argc, char** argv) {
  using namespace tessera::cli;
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<Options> options = ParseArgs(args);
  if (!options.ok()) {
    std::fprintf(stderr, "tessera-cli: %s\nRun 'tessera-cli --help' for usage.\n",
                 std::string(options.status().message()).c_str());
    return kExitUsage;
  }
  if (options->command == Command::kHelp) {
    std::fputs(UsageText(), stdout);
    return kExitOk;
  }
  // Before the channel exists, so that gRPC's threads inherit the signal mask.
  InterruptWatcher interrupts;
  Session session{*options, MakeChannel(options->server, options->tls), &interrupts};
  if (session.channel == nullptr) return kExitUsage;
  switch (options->command) {
    case Command::kGenerate: return RunGenerate(session);
    case Command::kTokenize: return RunTokenize(session);
    case Command::kDetokenize: return RunDetokenize(session);
    case Command::kInfo: return RunInfo(session);
    case Command::kHelp: break;
  }
  return kExitOk;
}
