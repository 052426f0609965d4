// tessera-server's command line. Every flag can also be set through the
// environment as TESSERA_<FLAG> (e.g. --max-num-seqs: TESSERA_MAX_NUM_SEQS);
// the command line wins.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/options.h"

namespace tessera::server {

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

struct ParsedFlags {
  ServerOptions options;
  bool help = false;  // --help was given
};

// Parses `argv` (argv[0] is the program) over the environment. Accepts
// "--flag value" and "--flag=value". INVALID_ARGUMENT names the bad flag.
absl::StatusOr<ParsedFlags> ParseFlags(int argc, const char* const* argv, const EnvLookup& env);

// The process environment.
std::optional<std::string> GetEnv(const std::string& name);

// The --help text.
std::string FlagsHelp(const std::string& program);

}  // namespace tessera::server
