// Renders a parsed template: statements, expressions and jinja2's scoping rules.
#ifndef TESSERA_ENGINE_TEMPLATE_INTERPRETER_H_
#define TESSERA_ENGINE_TEMPLATE_INTERPRETER_H_

#include <ctime>
#include <memory>
#include <string>

#include "engine/template/ast.h"
#include "engine/template/value.h"

namespace tessera::tmpl {

#define TMPL_RETURN_IF_ERROR(expr)      \
  do {                                  \
    absl::Status _st = (expr);          \
    if (!_st.ok()) return _st;          \
  } while (0)
#define TMPL_CONCAT_INNER(a, b) a##b
#define TMPL_CONCAT(a, b) TMPL_CONCAT_INNER(a, b)
#define TMPL_ASSIGN_OR_RETURN(lhs, expr)                      \
  auto TMPL_CONCAT(_sor_, __LINE__) = (expr);                 \
  if (!TMPL_CONCAT(_sor_, __LINE__).ok()) return TMPL_CONCAT(_sor_, __LINE__).status(); \
  lhs = std::move(*TMPL_CONCAT(_sor_, __LINE__))

struct Scope {
  absl::flat_hash_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

struct InterpreterLimits {
  size_t max_output_bytes;
  int64_t max_steps;
  int max_depth;
  std::tm now;
};

absl::Status Error(const std::string& type, const std::string& message);
absl::Status Exhausted(const std::string& what);

class Interpreter {
 public:
  explicit Interpreter(const InterpreterLimits& limits) : limits_(limits) {}
  // Empties the render's namespaces, which may hold themselves ({% set ns.x = ns %}).
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // A namespace() made by this render, emptied when the render ends.
  void TrackNamespace(std::shared_ptr<Dict> ns) { namespaces_.push_back(std::move(ns)); }

  absl::StatusOr<std::string> Render(const Body& body, const Value& context);

  // Shared with builtins.
  absl::Status Step(int64_t n = 1) {
    steps_ += n;
    if (steps_ > limits_.max_steps) return Exhausted("template exceeded its step limit");
    return absl::OkStatus();
  }
  absl::Status CheckSize(size_t n) const {
    if (n > limits_.max_output_bytes) return Exhausted("template output exceeded its size limit");
    return absl::OkStatus();
  }
  absl::StatusOr<Value> CallValue(const Value& fn, CallArgs& args);
  absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name);
  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
  absl::StatusOr<Value> ApplyFilter(const std::string& name, Value subject, CallArgs& args);
  absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& subject, CallArgs& args);
  const std::tm& now() const { return limits_.now; }
  size_t max_output_bytes() const { return limits_.max_output_bytes; }

 private:
  std::vector<std::shared_ptr<Dict>> namespaces_;
  enum class Flow { kNormal, kBreak, kContinue };
  absl::StatusOr<Flow> Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  absl::StatusOr<Flow> ExecStmt(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  absl::StatusOr<Flow> ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  absl::Status ExecSet(const Stmt& s, const std::shared_ptr<Scope>& scope, Value value);
  absl::Status Assign(const std::vector<std::string>& targets, const std::shared_ptr<Scope>& scope, Value value);
  Value MakeMacro(const Stmt& s, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> Eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalInner(const Expr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalCall(const Expr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalCompare(const Expr& e, const std::shared_ptr<Scope>& scope);
  absl::Status EvalArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope, CallArgs& out);
  Value Lookup(const std::string& name, const std::shared_ptr<Scope>& scope) const;
  absl::Status Append(std::string& out, std::string_view text) {
    out.append(text);
    return CheckSize(out.size());
  }

  struct DepthGuard {
    explicit DepthGuard(int& d) : d(d) { ++d; }
    ~DepthGuard() { --d; }
    int& d;
  };

  InterpreterLimits limits_;
  int64_t steps_ = 0;
  int depth_ = 0;
  Value filter_subject_;
  absl::flat_hash_map<std::string, Value> globals_;
};

// Python operators on values (builtins.cc).
absl::StatusOr<Value> BinaryOp(Interpreter& in, const std::string& op, const Value& a, const Value& b);
absl::StatusOr<bool> Contains(const Value& container, const Value& item);
// The items a for loop or a filter walks: list items, dict keys, string characters.
absl::StatusOr<List> Iterate(const Value& v);
// Globals: range, namespace, dict, raise_exception, strftime_now.
void AddGlobals(absl::flat_hash_map<std::string, Value>& globals);
absl::StatusOr<Value> CallMethod(Interpreter& in, const Value& obj, const std::string& name, CallArgs& args);
bool HasMethod(const Value& obj, const std::string& name);
std::string HtmlEscape(const std::string& s);

}  // namespace tessera::tmpl

#endif  // TESSERA_ENGINE_TEMPLATE_INTERPRETER_H_
