#include "engine/scheduler/stop_matcher.h"

#include <algorithm>

namespace tessera {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings, bool include_stop)
    : stops_(std::move(stop_strings)), include_stop_(include_stop) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopMatcher::Result StopMatcher::Push(const std::string& text) {
  Result result;
  pending_ += text;
  if (stops_.empty()) {
    result.text.swap(pending_);
    return result;
  }
  // Earliest match wins; among matches at the same position, the longest.
  size_t best_pos = std::string::npos, best_len = 0;
  for (const std::string& s : stops_) {
    const size_t pos = pending_.find(s);
    if (pos == std::string::npos) continue;
    if (pos < best_pos || (pos == best_pos && s.size() > best_len)) {
      best_pos = pos;
      best_len = s.size();
    }
  }
  if (best_pos != std::string::npos) {
    result.text = pending_.substr(0, include_stop_ ? best_pos + best_len : best_pos);
    result.stopped = true;
    pending_.clear();
    return result;
  }
  const size_t keep = HeldBackLength();
  result.text = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return result;
}

std::string StopMatcher::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

size_t StopMatcher::HeldBackLength() const {
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  return keep;
}

}  // namespace tessera
