// The JSON pieces of OpenAI responses: logprobs in the completions and chat
// shapes, usage, finish reasons and the fields every response object has.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/http/openai_request.h"

namespace tessera::server::http {

// Identity of one response (shared by its chunks).
struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;  // cmpl-... or chatcmpl-...
  int64_t created = 0;
  std::string model;
  bool stream = false;
};

// {"id", "object", "created", "model", "system_fingerprint"}; "object" is
// text_completion, chat.completion or chat.completion.chunk.
nlohmann::json ResponseObject(const ResponseMeta& meta);

// "stop" or "length"; OpenAI has no other reason for a normal finish.
const char* FinishReasonText(FinishReason reason);

// OpenAI's usage object; prompt_tokens_details.cached_tokens counts the
// prompt tokens the prefix cache supplied.
nlohmann::json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// Completions' logprobs object for `tokens`, appended to `out` (an object
// with tokens, token_logprobs, top_logprobs and text_offset arrays).
// `offset` is the text offset of the first token; it is advanced.
void AppendCompletionLogprobs(std::span<const GeneratedToken> tokens, const Tokenizer& tokenizer,
                              int64_t* offset, nlohmann::json* out);

// Chat's logprobs "content" entries for `tokens`, appended to the array `out`.
void AppendChatLogprobs(std::span<const GeneratedToken> tokens, const Tokenizer& tokenizer,
                        nlohmann::json* out);

// An empty logprobs value of the endpoint's shape.
nlohmann::json EmptyLogprobs(Endpoint endpoint);

// A fresh response id: the prefix and 24 random hex digits.
std::string NewResponseId(Endpoint endpoint);

// The system_fingerprint of this server (its version).
std::string SystemFingerprint();

}  // namespace tessera::server::http
