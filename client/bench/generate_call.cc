#include "client/bench/generate_call.h"

#include <utility>

namespace tessera::bench {

GenerateCall::GenerateCall(tessera::v1::Inference::Stub* stub,
                           tessera::v1::GenerateRequest request, int64_t index,
                           double timeout_seconds, std::atomic<int64_t>* tokens_received,
                           CallObserver* observer)
    : stub_(stub),
      request_(std::move(request)),
      tokens_received_(tokens_received),
      observer_(observer) {
  record_.index = index;
  record_.priority = request_.priority();
  const auto timeout = std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::duration<double>(timeout_seconds));
  context_.set_deadline(std::chrono::system_clock::now() + timeout);
}

void GenerateCall::Start() {
  stub_->async()->Generate(&context_, &request_, this);
  StartRead(&response_);
  sent_ = std::chrono::steady_clock::now();
  StartCall();
}

double GenerateCall::SecondsSinceSend() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - sent_).count();
}

void GenerateCall::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended; OnDone follows
  const double now = SecondsSinceSend();
  const int64_t tokens = response_.token_ids_size();
  timeline_.OnMessage(now, tokens);
  tokens_received_->fetch_add(tokens, std::memory_order_relaxed);
  record_.output_ids.insert(record_.output_ids.end(), response_.token_ids().begin(),
                            response_.token_ids().end());
  if (response_.prompt_token_ids_size() > 0) {
    record_.prompt_tokens = response_.prompt_token_ids_size();
  }
  // The last message's usage is authoritative when the server sends it.
  if (response_.has_usage() && response_.usage().prompt_tokens() > 0) {
    record_.prompt_tokens = response_.usage().prompt_tokens();
    record_.cached_prompt_tokens = response_.usage().cached_prompt_tokens();
  }
  if (response_.has_timings()) {
    record_.server_queue = response_.timings().queue_seconds();
    record_.server_ttft = response_.timings().time_to_first_token_seconds();
  }
  StartRead(&response_);
}

void GenerateCall::OnDone(const grpc::Status& status) {
  timeline_.OnDone(SecondsSinceSend());
  timeline_.FillRecord(record_);
  record_.ok = status.ok();
  record_.status_code = static_cast<int>(status.error_code());
  record_.error_message = status.error_message();
  if (record_.prompt_tokens == 0 && request_.has_token_ids()) {
    record_.prompt_tokens = request_.token_ids().ids_size();
  }
  CallObserver* observer = observer_;
  RequestRecord record = std::move(record_);
  observer->Detach(this);
  delete this;
  observer->Finished(std::move(record));
}

}  // namespace tessera::bench
