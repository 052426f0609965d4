#include "client/bench/timeline.h"

namespace tessera::bench {

double RequestRecord::Tpot() const {
  if (output_tokens < 2) return 0.0;
  return (e2e - ttft) / static_cast<double>(output_tokens - 1);
}

void TokenTimeline::OnMessage(double seconds, int64_t tokens) {
  if (tokens <= 0) return;
  if (tokens_ == 0) {
    ttft_ = seconds;
    itl_.insert(itl_.end(), static_cast<size_t>(tokens - 1), 0.0);
  } else {
    const double share = (seconds - last_) / static_cast<double>(tokens);
    itl_.insert(itl_.end(), static_cast<size_t>(tokens), share);
  }
  last_ = seconds;
  tokens_ += tokens;
}

void TokenTimeline::FillRecord(RequestRecord& record) const {
  record.ttft = ttft_;
  record.e2e = e2e_;
  record.itl = itl_;
  record.output_tokens = tokens_;
}

}  // namespace tessera::bench
