// Chat template engine: arbitrary template source parsed, then rendered with
// fixed messages (system, user, assistant with a tool call, tool result),
// tools and special tokens, under tight limits so that each input stays
// fast. A limit hit must be an error, never a hang or a crash.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string_view>

#include "engine/template/chat_template.h"
#include "fuzz_util.h"

namespace {

const nlohmann::json& Context() {
  static const auto* const kContext = new nlohmann::json(nlohmann::json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is the weather in Paris? \u00e9\u4e2d"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5}"},
      {"role": "assistant", "content": "21.5 degrees.", "reasoning_content": "Read the tool."},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "Weather by city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
      "required": ["city"]}}}],
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "enable_thinking": false
  })"));
  return *kContext;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto parsed = tessera::ChatTemplate::Parse(source);
  if (!parsed.ok()) return 0;
  tessera::TemplateLimits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_steps = 200'000;
  tessera::RenderOptions options;
  std::tm now{};
  now.tm_year = 126;
  now.tm_mon = 11;
  now.tm_mday = 1;
  options.now = now;
  auto out = parsed->Render(Context(), limits, options);
  if (out.ok()) {
    tessera::fuzz::Check(out->size() <= limits.max_output_bytes, "output within max_output_bytes");
  }
  return 0;
}
