#include "engine/template/chat_template.h"

#include <utility>
#include <vector>

#include "engine/template/ast.h"
#include "engine/template/interpreter.h"

namespace tessera {

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  auto body = tmpl::ParseTemplate(source);
  if (!body.ok()) return body.status();
  ChatTemplate t;
  t.body_ = std::move(*body);
  return t;
}

namespace {

constexpr int kMaxContextDepth = 256;

// Whether JSON nests deeper than `limit` (walked without recursion).
template <typename Json>
bool TooDeep(const Json& root, int limit) {
  std::vector<std::pair<const Json*, int>> stack{{&root, 0}};
  while (!stack.empty()) {
    auto [j, d] = stack.back();
    stack.pop_back();
    if (d > limit) return true;
    if (j->is_array() || j->is_object()) {
      for (const auto& child : *j) stack.emplace_back(&child, d + 1);
    }
  }
  return false;
}

template <typename Json>
absl::StatusOr<std::string> RenderBody(const std::shared_ptr<const tmpl::Body>& body, const Json& context,
                                       const TemplateLimits& limits, const RenderOptions& options) {
  if (!body) return absl::FailedPreconditionError("template not parsed");
  if (!context.is_object()) return absl::InvalidArgumentError("template context must be a JSON object");
  if (TooDeep(context, kMaxContextDepth)) return absl::InvalidArgumentError("template context nested too deeply");
  tmpl::InterpreterLimits il{limits.max_output_bytes, limits.max_steps, limits.max_depth, {}};
  if (options.now) {
    il.now = *options.now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &il.now);
  }
  tmpl::Interpreter interpreter(il);
  return interpreter.Render(*body, tmpl::Value::FromJson(context));
}

}  // namespace

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context, const TemplateLimits& limits,
                                                 const RenderOptions& options) const {
  return RenderBody(body_, context, limits, options);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context,
                                                 const TemplateLimits& limits,
                                                 const RenderOptions& options) const {
  return RenderBody(body_, context, limits, options);
}

}  // namespace tessera
