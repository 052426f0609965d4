// A Jinja2 chat template engine: renders models' chat templates as Hugging Face
// transformers does (jinja2's ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loopcontrols extension, `{% generation %}`, transformers' `tojson`,
// `raise_exception` and `strftime_now`).
#ifndef TESSERA_ENGINE_TEMPLATE_CHAT_TEMPLATE_H_
#define TESSERA_ENGINE_TEMPLATE_CHAT_TEMPLATE_H_

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera {

namespace tmpl {
struct Stmt;
}  // namespace tmpl

struct TemplateLimits {
  size_t max_output_bytes = 1 << 20;
  int64_t max_steps = 10'000'000;
  int max_depth = 256;
};

struct RenderOptions {
  // The time strftime_now() formats (local time fields); the current local time when unset.
  std::optional<std::tm> now;
};

class ChatTemplate {
 public:
  // Parses a template; a syntax error (INVALID_ARGUMENT) names the line and what was expected.
  static absl::StatusOr<ChatTemplate> Parse(std::string_view source);

  // Renders with `context` (e.g. {"messages": [...], "tools": [...], "add_generation_prompt":
  // true, "bos_token": "<s>", ...}). raise_exception(msg) gives INVALID_ARGUMENT with exactly
  // the template's message; other template errors give INVALID_ARGUMENT "<Python exception
  // type>: <message>" as jinja2 words it; exceeding a limit gives RESOURCE_EXHAUSTED.
  absl::StatusOr<std::string> Render(const nlohmann::json& context, const TemplateLimits& limits = {},
                                     const RenderOptions& options = {}) const;
  // The same, keeping the context's key order (Python dicts iterate in insertion order, and
  // templates that walk a tool's parameters print them in that order).
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context, const TemplateLimits& limits,
                                     const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<tmpl::Stmt>>> body_;
};

}  // namespace tessera

#endif  // TESSERA_ENGINE_TEMPLATE_CHAT_TEMPLATE_H_
