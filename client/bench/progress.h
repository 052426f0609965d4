// The live progress line tessera-bench shows on a terminal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tessera::bench {

struct ProgressSnapshot {
  int64_t completed = 0;            // finished with status OK
  int64_t failed = 0;
  std::optional<int64_t> total;     // requests the run will send, when known
  std::optional<double> duration;   // the run's --duration, when set
  double elapsed_seconds = 0.0;
  int64_t tokens_received = 0;      // generated tokens streamed so far
};

// One line without a line break, e.g.
// "  37/100 done, 0 failed, 2.3 s, 1520.4 output tok/s".
std::string FormatProgress(const ProgressSnapshot& snapshot);

}  // namespace tessera::bench
