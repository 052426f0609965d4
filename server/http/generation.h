// One OpenAI completion or chat completion in flight: its n engine requests
// (choices), what they produced so far, and the bytes to send for each
// engine event (SSE chunks when streaming, one JSON body at the end
// otherwise). Not thread-safe: the session calls it on its strand. The
// engine's events reach the session through ChoiceSink.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/auth/key_queue.h"
#include "server/http/errors.h"
#include "server/http/openai_response.h"
#include "server/metrics.h"

namespace tessera::server::http {

// An engine event for one choice.
struct ChoiceEvent {
  int index = 0;
  bool finished = false;
  TokenEvent tokens;   // when !finished
  FinishEvent finish;  // when finished
};

// Where a choice's events go (the session); Deliver is called on the engine
// thread and must only queue the event.
class ChoiceTarget {
 public:
  virtual ~ChoiceTarget() = default;
  virtual void Deliver(ChoiceEvent event) = 0;
};

// The engine's sink for one choice. Records the request's metrics (HTTP
// front) on the engine thread, so that they count even when the client is
// gone, and forwards the events while the target lives.
class ChoiceSink : public GenerationSink {
 public:
  ChoiceSink(std::weak_ptr<ChoiceTarget> target, int index, Metrics* metrics,
             std::shared_ptr<std::atomic<bool>> client_gone)
      : target_(std::move(target)), index_(index), metrics_(metrics),
        client_gone_(std::move(client_gone)) {}

  // Before the engine sees the request; released at the first token or end.
  void SetQueueTicket(auth::KeyQueue::Ticket ticket) { queue_ticket_ = std::move(ticket); }

  void OnTokens(TokenEvent event) override;
  void OnFinish(FinishEvent event) override;

 private:
  auth::KeyQueue::Ticket queue_ticket_;
  std::weak_ptr<ChoiceTarget> target_;
  const int index_;
  Metrics* const metrics_;
  std::shared_ptr<std::atomic<bool>> client_gone_;
  std::optional<Clock::time_point> last_event_;
};

class Generation {
 public:
  Generation(ResponseMeta meta, int n, bool include_usage, bool logprobs,
             const Tokenizer* tokenizer);

  // SSE bytes that open a stream (chat: each choice's role).
  std::string StreamStart();
  // The bytes to send for an event: SSE chunks when streaming (the last
  // event adds the usage chunk and [DONE]); empty otherwise.
  std::string OnEvent(const ChoiceEvent& event);
  // True once every choice finished.
  bool done() const { return unfinished_ == 0; }
  // Not streaming, once done: the response body, or the error to answer.
  std::string FinalBody() const;
  const std::optional<HttpError>& error() const { return error_; }

 private:
  struct Choice {
    std::string text;
    nlohmann::json logprobs;
    int64_t text_offset = 0;
    const char* finish_reason = nullptr;
    int64_t completion_tokens = 0;
  };

  std::string Chunk(int index, const std::string& text, nlohmann::json logprobs,
                    const char* finish_reason) const;
  std::string Sse(const nlohmann::json& value) const;
  nlohmann::json TokenLogprobs(Choice& choice, const std::vector<GeneratedToken>& tokens) const;
  std::string OnFinish(const ChoiceEvent& event);
  nlohmann::json FinalChoice(int index, const Choice& choice) const;

  ResponseMeta meta_;
  bool include_usage_;
  bool logprobs_;
  const Tokenizer* tokenizer_;
  std::vector<Choice> choices_;
  int unfinished_;
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  std::optional<HttpError> error_;
};

}  // namespace tessera::server::http
