// The syntax tree of a parsed template. Immutable once parsed; shared by copies of a
// ChatTemplate.
#ifndef TESSERA_ENGINE_TEMPLATE_AST_H_
#define TESSERA_ENGINE_TEMPLATE_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/template/value.h"

namespace tessera::tmpl {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kConst,    // constant
  kName,     // name
  kAttr,     // args[0].name
  kItem,     // args[0][args[1]]
  kSlice,    // args[0][args[1]:args[2]:args[3]] (null parts omitted)
  kCall,     // args[0](args[1..], kwargs)
  kFilter,   // args[0] | name(args[1..], kwargs); args[0] null inside {% filter %}
  kTest,     // args[0] is name(args[1..]); negated when `is not`
  kNot,      // not args[0]
  kNeg,      // -args[0]
  kPos,      // +args[0]
  kBinary,   // args[0] name args[1]: + - * / // % ** ~
  kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ...
  kAnd,
  kOr,
  kCond,     // args[0] if args[1] else args[2] (args[2] may be null)
  kList,
  kTuple,
  kDict,     // args: key, value, key, value, ...
};

struct Expr {
  Expr() = default;
  Expr(Expr&&) = default;
  Expr& operator=(Expr&&) = default;
  // Frees the children with an explicit stack (ast.cc): a long operator, attribute or
  // filter chain is as deep as it is long, and must not exhaust the native stack.
  ~Expr();

  ExprKind kind;
  int line = 0;
  Value constant;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches
  kFor,          // for targets in expr [if cond] body [else else_body]
  kSet,          // set targets = expr, or set targets[0].attr = expr
  kSetBlock,     // set targets[0] %} body {% endset (filter in expr, subject null)
  kMacro,        // macro name(params=defaults) body
  kCallBlock,    // call(params) expr %} body: `caller` is body
  kFilterBlock,  // filter expr %} body
  kBreak,
  kContinue,
  kScope,        // a body rendered as is ({% generation %})
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  std::string attr;
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when none
  Body body;
  Body else_body;
};

// Parses tokens into statements. Errors are INVALID_ARGUMENT naming the line.
absl::StatusOr<std::shared_ptr<const Body>> ParseTemplate(std::string_view source);

}  // namespace tessera::tmpl

#endif  // TESSERA_ENGINE_TEMPLATE_AST_H_
