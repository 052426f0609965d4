#include "client/bench/progress.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::bench {

std::string FormatProgress(const ProgressSnapshot& s) {
  const int64_t finished = s.completed + s.failed;
  std::string line = s.total ? absl::StrFormat("%6d/%d done", finished, *s.total)
                             : absl::StrFormat("%6d done", finished);
  absl::StrAppendFormat(&line, ", %d failed, %.1f", s.failed, s.elapsed_seconds);
  if (s.duration) absl::StrAppendFormat(&line, "/%.0f", *s.duration);
  const double rate = s.elapsed_seconds > 0.0
                          ? static_cast<double>(s.tokens_received) / s.elapsed_seconds
                          : 0.0;
  absl::StrAppendFormat(&line, " s, %.1f output tok/s", rate);
  return line;
}

}  // namespace tessera::bench
