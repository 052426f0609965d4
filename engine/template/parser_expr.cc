// Expressions of the template grammar, by jinja2's precedence: conditional, or, and, not,
// comparisons, + -, ~, * / // %, **, unary, then postfix, filters and tests.
#include <cerrno>
#include <cstdlib>

#include "engine/template/interpreter.h"
#include "engine/template/parser.h"

namespace tessera::tmpl {

absl::StatusOr<ExprPtr> Parser::ParseTuple(bool condexpr) {
  int line = Cur().line;
  auto first = ParseExpr(condexpr);
  if (!first.ok()) return first;
  if (!IsOp(",")) return first;
  auto t = std::make_unique<Expr>();
  t->kind = ExprKind::kTuple;
  t->line = line;
  t->args.push_back(std::move(*first));
  while (SkipOp(",")) {
    if (Cur().type == Tok::kBlockEnd || Cur().type == Tok::kVarEnd || IsOp(")")) break;
    auto e = ParseExpr(condexpr);
    if (!e.ok()) return e;
    t->args.push_back(std::move(*e));
  }
  return t;
}

absl::StatusOr<ExprPtr> Parser::ParseExpr(bool condexpr) {
  DepthGuard guard(depth_);
  if (depth_ > kMaxParseDepth) return Fail("expression nested too deeply");
  auto node = ParseOr();
  if (!node.ok() || !condexpr) return node;
  ExprPtr result = std::move(*node);
  while (SkipName("if")) {
    auto c = Make(ExprKind::kCond);
    auto cond = ParseOr();
    if (!cond.ok()) return cond;
    ExprPtr else_expr;
    if (SkipName("else")) {
      auto e = ParseExpr(true);
      if (!e.ok()) return e;
      else_expr = std::move(*e);
    }
    c->args.push_back(std::move(result));
    c->args.push_back(std::move(*cond));
    c->args.push_back(std::move(else_expr));
    result = std::move(c);
  }
  return result;
}

absl::StatusOr<ExprPtr> Parser::ParseOr() {
  auto left = ParseAnd();
  if (!left.ok()) return left;
  ExprPtr node = std::move(*left);
  while (SkipName("or")) {
    auto right = ParseAnd();
    if (!right.ok()) return right;
    auto e = Make(ExprKind::kOr);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(*right));
    node = std::move(e);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseAnd() {
  auto left = ParseNot();
  if (!left.ok()) return left;
  ExprPtr node = std::move(*left);
  while (SkipName("and")) {
    auto right = ParseNot();
    if (!right.ok()) return right;
    auto e = Make(ExprKind::kAnd);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(*right));
    node = std::move(e);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(depth_);
    if (depth_ > kMaxParseDepth) return Fail("expression nested too deeply");
    auto e = Make(ExprKind::kNot);
    Next();
    auto inner = ParseNot();
    if (!inner.ok()) return inner;
    e->args.push_back(std::move(*inner));
    return e;
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  auto first = ParseMath1();
  if (!first.ok()) return first;
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (Cur().type == Tok::kOp && (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" ||
                                   Cur().value == ">" || Cur().value == "<=" || Cur().value == ">=")) {
      op = Cur().value;
      Next();
    } else if (IsName("in")) {
      op = "in";
      Next();
    } else if (IsName("not") && Peek().type == Tok::kName && Peek().value == "in") {
      op = "notin";
      Next();
      Next();
    } else {
      break;
    }
    auto right = ParseMath1();
    if (!right.ok()) return right;
    if (!cmp) {
      cmp = Make(ExprKind::kCompare);
      cmp->args.push_back(std::move(*first));
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(std::move(*right));
  }
  if (cmp) return cmp;
  return first;
}

#define TMPL_BINARY_LEVEL(Func, Next_, ...)                                  \
  absl::StatusOr<ExprPtr> Parser::Func() {                                   \
    auto left = Next_;                                                       \
    if (!left.ok()) return left;                                             \
    ExprPtr node = std::move(*left);                                         \
    while (true) {                                                           \
      std::string op = MatchOp({__VA_ARGS__});                               \
      if (op.empty()) break;                                                 \
      auto e = Make(ExprKind::kBinary);                                      \
      Next();                                                                \
      auto right = Next_;                                                    \
      if (!right.ok()) return right;                                         \
      e->name = op;                                                          \
      e->args.push_back(std::move(node));                                    \
      e->args.push_back(std::move(*right));                                  \
      node = std::move(e);                                                   \
    }                                                                        \
    return node;                                                             \
  }

TMPL_BINARY_LEVEL(ParseMath1, ParseConcat(), "+", "-")
TMPL_BINARY_LEVEL(ParseConcat, ParseMath2(), "~")
TMPL_BINARY_LEVEL(ParseMath2, ParsePow(), "*", "/", "//", "%")
TMPL_BINARY_LEVEL(ParsePow, ParseUnary(true), "**")

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  DepthGuard guard(depth_);
  if (depth_ > kMaxParseDepth) return Fail("expression nested too deeply");
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = Make(IsOp("-") ? ExprKind::kNeg : ExprKind::kPos);
    Next();
    auto inner = ParseUnary(false);
    if (!inner.ok()) return inner;
    node->args.push_back(std::move(*inner));
  } else {
    auto p = ParsePrimary();
    if (!p.ok()) return p;
    node = std::move(*p);
  }
  auto post = ParsePostfix(std::move(node));
  if (!post.ok() || !with_filter) return post;
  return ParseFilterExpr(std::move(*post));
}

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token& t = Cur();
  if (t.type == Tok::kName) {
    auto e = Make(ExprKind::kConst);
    if (t.value == "true" || t.value == "True") e->constant = Value::Bool(true);
    else if (t.value == "false" || t.value == "False") e->constant = Value::Bool(false);
    else if (t.value == "none" || t.value == "None") e->constant = Value::None();
    else { e->kind = ExprKind::kName; e->name = t.value; }
    Next();
    return e;
  }
  if (t.type == Tok::kString) {
    auto e = Make(ExprKind::kConst);
    std::string s;
    while (Cur().type == Tok::kString) { s += Cur().value; Next(); }
    e->constant = Value::String(std::move(s));
    return e;
  }
  if (t.type == Tok::kInt || t.type == Tok::kFloat) {
    auto e = Make(ExprKind::kConst);
    errno = 0;
    if (t.type == Tok::kInt) {
      char* end = nullptr;
      long long v = std::strtoll(t.value.c_str(), &end, 10);
      if (errno == ERANGE) return Fail("integer literal out of range");
      e->constant = Value::Int(v);
    } else {
      e->constant = Value::Float(std::strtod(t.value.c_str(), nullptr));
    }
    Next();
    return e;
  }
  if (IsOp("(")) {
    Next();
    if (SkipOp(")")) { auto e = Make(ExprKind::kTuple); return e; }
    auto inner = ParseTuple(true);
    if (!inner.ok()) return inner;
    TMPL_RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (IsOp("[") || IsOp("{")) {
    bool dict = IsOp("{");
    auto e = Make(dict ? ExprKind::kDict : ExprKind::kList);
    Next();
    const char* close = dict ? "}" : "]";
    while (!IsOp(close)) {
      if (!e->args.empty()) TMPL_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(close)) break;
      auto item = ParseExpr();
      if (!item.ok()) return item;
      e->args.push_back(std::move(*item));
      if (dict) {
        TMPL_RETURN_IF_ERROR(ExpectOp(":"));
        auto v = ParseExpr();
        if (!v.ok()) return v;
        e->args.push_back(std::move(*v));
      }
    }
    Next();
    return e;
  }
  return Fail(absl::StrCat("unexpected ", Describe(t), ", expected an expression"));
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".")) {
      Next();
      if (Cur().type == Tok::kName) {
        auto e = Make(ExprKind::kAttr);
        e->name = Cur().value;
        Next();
        e->args.push_back(std::move(node));
        node = std::move(e);
      } else if (Cur().type == Tok::kInt) {
        auto e = Make(ExprKind::kItem);
        auto idx = Make(ExprKind::kConst);
        idx->constant = Value::Int(std::strtoll(Cur().value.c_str(), nullptr, 10));
        Next();
        e->args.push_back(std::move(node));
        e->args.push_back(std::move(idx));
        node = std::move(e);
      } else {
        return Expected("name or number after '.'");
      }
    } else if (IsOp("[")) {
      auto sub = ParseSubscript(std::move(node));
      if (!sub.ok()) return sub;
      node = std::move(*sub);
    } else if (IsOp("(")) {
      auto call = Make(ExprKind::kCall);
      call->args.push_back(std::move(node));
      TMPL_RETURN_IF_ERROR(ParseCallArgs(*call));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  Next();  // [
  ExprPtr parts[3];
  bool slice = false;
  for (int i = 0; i < 3; ++i) {
    if (!IsOp(":") && !IsOp("]")) {
      auto e = ParseExpr();
      if (!e.ok()) return e;
      parts[i] = std::move(*e);
    }
    if (i < 2 && SkipOp(":")) { slice = true; continue; }
    break;
  }
  TMPL_RETURN_IF_ERROR(ExpectOp("]"));
  auto e = Make(slice ? ExprKind::kSlice : ExprKind::kItem);
  if (!slice && !parts[0]) return Fail("expected a subscript");
  e->args.push_back(std::move(node));
  for (int i = 0; i < (slice ? 3 : 1); ++i) e->args.push_back(std::move(parts[i]));
  return e;
}

absl::Status Parser::ParseCallArgs(Expr& call) {
  TMPL_RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!IsOp(")")) {
    if (!first) TMPL_RETURN_IF_ERROR(ExpectOp(","));
    first = false;
    if (IsOp(")")) break;
    if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().value == "=") {
      std::string key = Cur().value;
      Next();
      Next();
      auto v = ParseExpr();
      if (!v.ok()) return v.status();
      call.kwargs.emplace_back(key, std::move(*v));
    } else {
      if (!call.kwargs.empty()) return Fail("positional argument after keyword argument");
      auto v = ParseExpr();
      if (!v.ok()) return v.status();
      call.args.push_back(std::move(*v));
    }
  }
  Next();
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      Next();
      auto f = ParseFilter(std::move(node));
      if (!f.ok()) return f;
      node = std::move(*f);
    } else if (IsName("is")) {
      auto t = ParseTest(std::move(node));
      if (!t.ok()) return t;
      node = std::move(*t);
    } else if (IsOp("(")) {
      auto call = Make(ExprKind::kCall);
      call->args.push_back(std::move(node));
      TMPL_RETURN_IF_ERROR(ParseCallArgs(*call));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseFilter(ExprPtr subject) {
  auto e = Make(ExprKind::kFilter);
  auto name = ExpectName();
  if (!name.ok()) return name.status();
  e->name = *name;
  while (IsOp(".") && Peek().type == Tok::kName) {
    Next();
    e->name += "." + Cur().value;
    Next();
  }
  e->args.push_back(std::move(subject));
  if (IsOp("(")) TMPL_RETURN_IF_ERROR(ParseCallArgs(*e));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParseTest(ExprPtr subject) {
  auto e = Make(ExprKind::kTest);
  Next();  // is
  e->negated = SkipName("not");
  auto name = ExpectName();
  if (!name.ok()) return name.status();
  e->name = *name;
  e->args.push_back(std::move(subject));
  if (IsOp("(")) {
    TMPL_RETURN_IF_ERROR(ParseCallArgs(*e));
  } else if ((Cur().type == Tok::kName || Cur().type == Tok::kString || Cur().type == Tok::kInt ||
              Cur().type == Tok::kFloat || IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Fail("You cannot chain multiple tests with is");
    auto arg = ParsePrimary();
    if (!arg.ok()) return arg;
    auto post = ParsePostfix(std::move(*arg));
    if (!post.ok()) return post;
    e->args.push_back(std::move(*post));
  }
  return e;
}

}  // namespace tessera::tmpl
