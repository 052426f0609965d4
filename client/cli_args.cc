#include "client/cli_args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera::cli {
namespace {

constexpr char kUsage[] = R"(usage: tessera-cli [--server HOST:PORT] [--timeout SECONDS] COMMAND [ARGS]

Global options (accepted anywhere on the line):
  --server HOST:PORT   server address (default: $TESSERA_SERVER, else localhost:50051)
  --timeout SECONDS    deadline of each call (default: none)
  --tls-ca FILE        connect with TLS, trusting the CA certificates in FILE
  --tls-cert FILE      client certificate for servers that require one (with --tls-key)
  --tls-key FILE       private key of --tls-cert
  --api-key KEY        API key of a server run with --api-key-file (default: $TESSERA_API_KEY)
  --help, -h           print this help

Commands:
  generate PROMPT [options]   stream a completion of PROMPT
      --max-tokens N          most tokens to generate (server default 16)
      --temperature T         0 is greedy (server default 1)
      --top-k K               keep the K most likely tokens (0: off)
      --top-p P               nucleus sampling, in (0, 1]
      --min-p P               drop tokens below P times the top probability
      --repetition-penalty R  CTRL-style penalty on prompt and output tokens
      --presence-penalty X    subtracted from tokens already generated
      --frequency-penalty X   subtracted per previous occurrence
      --seed S                random seed, for reproducible sampling
      --stop STR              stop before STR (repeatable)
      --stop-token-id ID      stop after token ID (repeatable)
      --ignore-eos            keep going past the end-of-generation token
      --logprobs N            report each token's logprob and N alternatives
      --json                  print one JSON object at the end instead of streaming
  tokenize TEXT [--bos|--no-bos] [--json]
                              print the token ids and pieces of TEXT
  detokenize ID... [--json]   print the text of the token ids
  info [--wait SECONDS] [--json]
                              print the model and server state; exits 0 only when
                              the server reports SERVING; --wait retries until then

Exit codes: 0 success, 1 server not serving, 2 usage error, 3 server unreachable,
4 request refused or failed, 130 interrupted.
)";

absl::Status UsageError(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

absl::Status BadValue(absl::string_view flag, absl::string_view value, absl::string_view want) {
  return UsageError(absl::StrCat("invalid value '", value, "' for ", flag, ": expected ", want));
}

absl::StatusOr<int32_t> ParseInt32(absl::string_view flag, const std::string& value) {
  int32_t out = 0;
  if (!absl::SimpleAtoi(value, &out)) return BadValue(flag, value, "an integer");
  return out;
}

absl::StatusOr<uint64_t> ParseUint64(absl::string_view flag, const std::string& value) {
  uint64_t out = 0;
  if (value.empty() || value[0] == '-' || !absl::SimpleAtoi(value, &out)) {
    return BadValue(flag, value, "a non-negative integer");
  }
  return out;
}

// Accepts nan and inf too: range checks are the server's, so that the CLI
// reports exactly what the server accepts.
absl::StatusOr<double> ParseDouble(absl::string_view flag, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const double out = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size()) {
    return BadValue(flag, value, "a number");
  }
  return out;
}

absl::StatusOr<float> ParseFloat(absl::string_view flag, const std::string& value) {
  absl::StatusOr<double> d = ParseDouble(flag, value);
  if (!d.ok()) return d.status();
  return static_cast<float>(*d);
}

// Bit set of the commands a flag applies to.
enum : unsigned {
  kGen = 1u << static_cast<int>(Command::kGenerate),
  kTok = 1u << static_cast<int>(Command::kTokenize),
  kDetok = 1u << static_cast<int>(Command::kDetokenize),
  kInfo = 1u << static_cast<int>(Command::kInfo),
  kAll = kGen | kTok | kDetok | kInfo | 1u,
};

struct Flag {
  const char* name;
  bool takes_value;
  unsigned commands;
  std::function<absl::Status(Options&, const std::string&)> apply;
};

// Wraps a parse into an assignment: Set(&GenerateOptions::top_k, ParseInt32).
template <typename T, typename Field, typename Parser>
std::function<absl::Status(Options&, const std::string&)> Set(Field field, Parser parse,
                                                             absl::string_view flag) {
  return [field, parse, flag](Options& o, const std::string& v) -> absl::Status {
    absl::StatusOr<T> parsed = parse(flag, v);
    if (!parsed.ok()) return parsed.status();
    o.generate.*field = *parsed;
    return absl::OkStatus();
  };
}

std::function<absl::Status(Options&, const std::string&)> PathFlag(
    std::string client::ClientTls::*field, const char* flag) {
  return [field, flag](Options& o, const std::string& v) {
    if (v.empty()) return UsageError(absl::StrCat(flag, " needs a file"));
    o.tls.*field = v;
    return absl::OkStatus();
  };
}

// Flags of more than one command, and of tokenize and info.
std::vector<Flag> CommonFlags() {
  return {
      {"--server", true, kAll,
       [](Options& o, const std::string& v) {
         if (v.empty()) return UsageError("--server needs HOST:PORT");
         o.server = v;
         return absl::OkStatus();
       }},
      {"--timeout", true, kAll,
       [](Options& o, const std::string& v) -> absl::Status {
         absl::StatusOr<double> t = ParseDouble("--timeout", v);
         if (!t.ok()) return t.status();
         if (!(*t > 0) || !std::isfinite(*t)) return BadValue("--timeout", v, "seconds > 0");
         o.timeout_seconds = *t;
         return absl::OkStatus();
       }},
      {"--tls-ca", true, kAll, PathFlag(&client::ClientTls::ca_path, "--tls-ca")},
      {"--tls-cert", true, kAll, PathFlag(&client::ClientTls::cert_path, "--tls-cert")},
      {"--tls-key", true, kAll, PathFlag(&client::ClientTls::key_path, "--tls-key")},
      {"--api-key", true, kAll,
       [](Options& o, const std::string& v) {
         if (v.empty()) return UsageError("--api-key needs a key");
         o.api_key = v;
         return absl::OkStatus();
       }},
      {"--json", false, kGen | kTok | kDetok | kInfo,
       [](Options& o, const std::string&) {
         o.json = true;
         return absl::OkStatus();
       }},
      {"--wait", true, kInfo,
       [](Options& o, const std::string& v) -> absl::Status {
         absl::StatusOr<double> t = ParseDouble("--wait", v);
         if (!t.ok()) return t.status();
         if (!(*t >= 0) || !std::isfinite(*t)) return BadValue("--wait", v, "seconds >= 0");
         o.wait_seconds = *t;
         return absl::OkStatus();
       }},
      {"--bos", false, kTok,
       [](Options& o, const std::string&) {
         o.tokenize.add_bos = true;
         return absl::OkStatus();
       }},
      {"--no-bos", false, kTok,
       [](Options& o, const std::string&) {
         o.tokenize.add_bos = false;
         return absl::OkStatus();
       }},
  };
}

std::vector<Flag> GenerateFlags() {
  return {
      {"--max-tokens", true, kGen, Set<int32_t>(&GenerateOptions::max_tokens, ParseInt32, "--max-tokens")},
      {"--temperature", true, kGen, Set<float>(&GenerateOptions::temperature, ParseFloat, "--temperature")},
      {"--top-k", true, kGen, Set<int32_t>(&GenerateOptions::top_k, ParseInt32, "--top-k")},
      {"--top-p", true, kGen, Set<float>(&GenerateOptions::top_p, ParseFloat, "--top-p")},
      {"--min-p", true, kGen, Set<float>(&GenerateOptions::min_p, ParseFloat, "--min-p")},
      {"--repetition-penalty", true, kGen,
       Set<float>(&GenerateOptions::repetition_penalty, ParseFloat, "--repetition-penalty")},
      {"--presence-penalty", true, kGen,
       Set<float>(&GenerateOptions::presence_penalty, ParseFloat, "--presence-penalty")},
      {"--frequency-penalty", true, kGen,
       Set<float>(&GenerateOptions::frequency_penalty, ParseFloat, "--frequency-penalty")},
      {"--seed", true, kGen, Set<uint64_t>(&GenerateOptions::seed, ParseUint64, "--seed")},
      {"--stop", true, kGen,
       [](Options& o, const std::string& v) {
         o.generate.stop.push_back(v);
         return absl::OkStatus();
       }},
      {"--stop-token-id", true, kGen,
       [](Options& o, const std::string& v) -> absl::Status {
         absl::StatusOr<int32_t> id = ParseInt32("--stop-token-id", v);
         if (!id.ok()) return id.status();
         o.generate.stop_token_ids.push_back(*id);
         return absl::OkStatus();
       }},
      {"--ignore-eos", false, kGen,
       [](Options& o, const std::string&) {
         o.generate.ignore_eos = true;
         return absl::OkStatus();
       }},
      {"--logprobs", true, kGen,
       [](Options& o, const std::string& v) -> absl::Status {
         absl::StatusOr<int32_t> n = ParseInt32("--logprobs", v);
         if (!n.ok()) return n.status();
         o.generate.top_logprobs = *n;
         o.generate.logprobs = true;
         return absl::OkStatus();
       }},
  };
}

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = [] {
    std::vector<Flag> all = CommonFlags();
    std::vector<Flag> generate = GenerateFlags();
    all.insert(all.end(), generate.begin(), generate.end());
    return all;
  }();
  return flags;
}

std::optional<Command> CommandNamed(const std::string& name) {
  if (name == "generate") return Command::kGenerate;
  if (name == "tokenize") return Command::kTokenize;
  if (name == "detokenize") return Command::kDetokenize;
  if (name == "info") return Command::kInfo;
  return std::nullopt;
}

// "-5" is a value (a token id, a prompt), not a flag.
bool LooksLikeFlag(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && !(arg[1] >= '0' && arg[1] <= '9');
}

// Checks the positional arguments of the command and stores them.
absl::Status TakePositionals(Options& o, const std::vector<std::string>& pos) {
  switch (o.command) {
    case Command::kHelp:
      return absl::OkStatus();
    case Command::kGenerate:
      if (pos.size() != 1) return UsageError("generate takes exactly one PROMPT argument");
      o.generate.prompt = pos[0];
      return absl::OkStatus();
    case Command::kTokenize:
      if (pos.size() != 1) return UsageError("tokenize takes exactly one TEXT argument");
      o.tokenize.text = pos[0];
      return absl::OkStatus();
    case Command::kDetokenize:
      if (pos.empty()) return UsageError("detokenize needs at least one token ID");
      for (const std::string& p : pos) {
        absl::StatusOr<int32_t> id = ParseInt32("detokenize", p);
        if (!id.ok()) return id.status();
        o.detokenize_ids.push_back(*id);
      }
      return absl::OkStatus();
    case Command::kInfo:
      if (!pos.empty()) return UsageError("info takes no arguments");
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

// A flag seen on the line, applied once the command is known.
struct PendingFlag {
  const Flag* flag;
  std::string value;
};

}  // namespace

std::string DefaultServer() {
  const char* env = std::getenv("TESSERA_SERVER");
  if (env != nullptr && env[0] != '\0') return env;
  return "localhost:50051";
}

std::string DefaultApiKey() {
  const char* env = std::getenv("TESSERA_API_KEY");
  return env != nullptr ? env : "";
}

const char* UsageText() { return kUsage; }

absl::StatusOr<Options> ParseArgs(const std::vector<std::string>& args) {
  Options o;
  o.server = DefaultServer();
  o.api_key = DefaultApiKey();
  std::vector<std::string> positionals;
  std::vector<PendingFlag> pending;
  bool help = false;
  bool only_positionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (only_positionals || !LooksLikeFlag(arg)) {
      positionals.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positionals = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      help = true;
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Flag* flag = nullptr;
    for (const Flag& f : Flags()) {
      if (name == f.name) flag = &f;
    }
    if (flag == nullptr) return UsageError(absl::StrCat("unknown option ", name));
    std::string value;
    if (flag->takes_value) {
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return UsageError(absl::StrCat(name, " needs a value"));
      }
    } else if (eq != std::string::npos) {
      return UsageError(absl::StrCat(name, " takes no value"));
    }
    pending.push_back({flag, std::move(value)});
  }
  if (help) return o;  // command stays kHelp
  if (positionals.empty()) return UsageError("no command given");
  std::optional<Command> command = CommandNamed(positionals.front());
  if (!command) return UsageError(absl::StrCat("unknown command '", positionals.front(), "'"));
  o.command = *command;
  positionals.erase(positionals.begin());
  for (const PendingFlag& p : pending) {
    if ((p.flag->commands & (1u << static_cast<int>(o.command))) == 0) {
      return UsageError(absl::StrCat(p.flag->name, " does not apply to this command"));
    }
    absl::Status s = p.flag->apply(o, p.value);
    if (!s.ok()) return s;
  }
  absl::Status s = TakePositionals(o, positionals);
  if (!s.ok()) return s;
  return o;
}

}  // namespace tessera::cli
