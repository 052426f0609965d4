// A recursive-descent parser following jinja2's grammar (jinja2/parser.py) for the
// statements and expressions chat templates use.
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/template/ast.h"
#include "engine/template/interpreter.h"
#include "engine/template/lexer.h"

namespace tessera::tmpl {
namespace {

constexpr int kMaxParseDepth = 200;


class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  absl::Status ParseBody(Body& out, std::vector<std::string> ends, std::string* found);

 private:
  const Token& Cur() const { return toks_[pos_]; }
  const Token& Peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  void Next() { if (pos_ + 1 < toks_.size()) ++pos_; }
  bool IsOp(std::string_view op) const { return Cur().type == Tok::kOp && Cur().value == op; }
  bool IsName(std::string_view n) const { return Cur().type == Tok::kName && Cur().value == n; }
  bool SkipOp(std::string_view op) { if (IsOp(op)) { Next(); return true; } return false; }
  bool SkipName(std::string_view n) { if (IsName(n)) { Next(); return true; } return false; }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case Tok::kEof: return "end of template";
      case Tok::kBlockEnd: return "end of statement block";
      case Tok::kVarEnd: return "end of print statement";
      case Tok::kName: return "'" + t.value + "'";
      case Tok::kOp: return "'" + t.value + "'";
      case Tok::kString: return "string";
      case Tok::kInt: return "integer";
      case Tok::kFloat: return "float";
      default: return "template data";
    }
  }
  absl::Status Fail(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("template syntax error at line ", Cur().line, ": ", what));
  }
  absl::Status Expected(const std::string& what) const {
    return Fail(absl::StrCat("expected ", what, ", got ", Describe(Cur())));
  }
  absl::Status ExpectOp(const std::string& op) {
    if (!SkipOp(op)) return Expected(absl::StrCat("'", op, "'"));
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Cur().type != Tok::kBlockEnd) return Expected("end of statement block");
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().type != Tok::kName) return Expected("a name");
    std::string n = Cur().value;
    Next();
    return n;
  }
  ExprPtr Make(ExprKind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = Cur().line;
    return e;
  }

  absl::Status ParseStatement(Body& out);
  absl::Status ParseIf(Body& out, int line);
  absl::Status ParseFor(Body& out, int line);
  absl::Status ParseSet(Body& out, int line);
  absl::Status ParseMacro(Body& out, int line, bool call_block);
  absl::Status ParseFilterBlock(Body& out, int line);
  absl::Status ParseTargets(std::vector<std::string>& names);
  absl::Status ParseParams(Stmt& s);

  absl::StatusOr<ExprPtr> ParseTuple(bool condexpr);
  absl::StatusOr<ExprPtr> ParseExpr(bool condexpr = true);
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr subject);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr subject);
  absl::Status ParseCallArgs(Expr& call);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);

  struct DepthGuard {
    explicit DepthGuard(int& d) : d(d) { ++d; }
    ~DepthGuard() { --d; }
    int& d;
  };

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<std::string> open_blocks_;
  std::vector<std::string> looking_for_;  // end tags of the innermost open block
};

absl::Status Parser::ParseBody(Body& out, std::vector<std::string> ends, std::string* found) {
  DepthGuard guard(depth_);
  if (depth_ > kMaxParseDepth) return Fail("blocks nested too deeply");
  while (true) {
    const Token& t = Cur();
    if (t.type == Tok::kEof) {
      if (ends.empty()) return absl::OkStatus();
      return Fail(absl::StrCat("unexpected end of template; looking for the tags ",
                               absl::StrJoin(ends, " or "), " (innermost open block '",
                               open_blocks_.back(), "')"));
    }
    if (t.type == Tok::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kText;
      s->line = t.line;
      s->text = t.value;
      out.push_back(std::move(s));
      Next();
      continue;
    }
    if (t.type == Tok::kVarBegin) {
      int line = t.line;
      Next();
      auto e = ParseTuple(true);
      if (!e.ok()) return e.status();
      if (Cur().type != Tok::kVarEnd) return Expected("end of print statement");
      Next();
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = line;
      s->expr = std::move(*e);
      out.push_back(std::move(s));
      continue;
    }
    if (t.type != Tok::kBlockBegin) return Fail("unexpected " + Describe(t));
    const Token& tag = Peek();
    if (tag.type == Tok::kName) {
      for (const auto& e : ends) {
        if (tag.value == e) {
          Next();
          Next();
          *found = e;
          return absl::OkStatus();
        }
      }
    }
    Next();
    std::vector<std::string> saved = std::move(looking_for_);
    looking_for_ = ends;
    absl::Status st = ParseStatement(out);
    looking_for_ = std::move(saved);
    TMPL_RETURN_IF_ERROR(st);
  }
}

absl::Status Parser::ParseStatement(Body& out) {
  if (Cur().type != Tok::kName) return Fail("tag name expected");
  std::string tag = Cur().value;
  int line = Cur().line;
  Next();
  if (tag == "if") return ParseIf(out, line);
  if (tag == "for") return ParseFor(out, line);
  if (tag == "set") return ParseSet(out, line);
  if (tag == "macro") return ParseMacro(out, line, false);
  if (tag == "call") return ParseMacro(out, line, true);
  if (tag == "filter") return ParseFilterBlock(out, line);
  if (tag == "break" || tag == "continue") {
    auto s = std::make_unique<Stmt>();
    s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    s->line = line;
    out.push_back(std::move(s));
    return ExpectBlockEnd();
  }
  if (tag == "generation") {
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kScope;
    s->line = line;
    std::string found;
    open_blocks_.push_back(tag);
    TMPL_RETURN_IF_ERROR(ParseBody(s->body, {"endgeneration"}, &found));
    open_blocks_.pop_back();
    out.push_back(std::move(s));
    return ExpectBlockEnd();
  }
  pos_--;
  std::string msg = absl::StrCat("Encountered unknown tag '", tag, "'");
  if (!looking_for_.empty() && !open_blocks_.empty()) {
    absl::StrAppend(&msg, "; looking for the tags ", absl::StrJoin(looking_for_, " or "),
                    " (innermost open block '", open_blocks_.back(), "')");
  }
  return Fail(msg);
}

absl::Status Parser::ParseIf(Body& out, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kIf;
  s->line = line;
  open_blocks_.push_back("if");
  while (true) {
    auto cond = ParseTuple(false);
    if (!cond.ok()) return cond.status();
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    Body body;
    std::string found;
    TMPL_RETURN_IF_ERROR(ParseBody(body, {"elif", "else", "endif"}, &found));
    s->branches.emplace_back(std::move(*cond), std::move(body));
    if (found == "elif") continue;
    if (found == "else") {
      TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
      Body else_body;
      TMPL_RETURN_IF_ERROR(ParseBody(else_body, {"endif"}, &found));
      s->branches.emplace_back(nullptr, std::move(else_body));
    }
    break;
  }
  open_blocks_.pop_back();
  out.push_back(std::move(s));
  return ExpectBlockEnd();
}

absl::Status Parser::ParseTargets(std::vector<std::string>& names) {
  bool paren = SkipOp("(");
  while (true) {
    auto n = ExpectName();
    if (!n.ok()) return n.status();
    names.push_back(*n);
    if (!SkipOp(",")) break;
    if (paren && IsOp(")")) break;
  }
  if (paren) return ExpectOp(")");
  return absl::OkStatus();
}

absl::Status Parser::ParseFor(Body& out, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFor;
  s->line = line;
  TMPL_RETURN_IF_ERROR(ParseTargets(s->targets));
  if (!SkipName("in")) return Expected("'in'");
  auto iter = ParseTuple(false);
  if (!iter.ok()) return iter.status();
  s->expr = std::move(*iter);
  if (SkipName("if")) {
    auto cond = ParseExpr();
    if (!cond.ok()) return cond.status();
    s->cond = std::move(*cond);
  }
  if (SkipName("recursive")) return Fail("recursive loops are not supported");
  TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
  open_blocks_.push_back("for");
  std::string found;
  TMPL_RETURN_IF_ERROR(ParseBody(s->body, {"else", "endfor"}, &found));
  if (found == "else") {
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    TMPL_RETURN_IF_ERROR(ParseBody(s->else_body, {"endfor"}, &found));
  }
  open_blocks_.pop_back();
  out.push_back(std::move(s));
  return ExpectBlockEnd();
}

absl::Status Parser::ParseSet(Body& out, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kSet;
  s->line = line;
  if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().value == ".") {
    s->targets.push_back(Cur().value);
    Next();
    Next();
    auto attr = ExpectName();
    if (!attr.ok()) return attr.status();
    s->attr = *attr;
  } else {
    TMPL_RETURN_IF_ERROR(ParseTargets(s->targets));
  }
  if (SkipOp("=")) {
    auto value = ParseTuple(true);
    if (!value.ok()) return value.status();
    s->expr = std::move(*value);
    out.push_back(std::move(s));
    return ExpectBlockEnd();
  }
  if (s->targets.size() != 1 || !s->attr.empty()) return Expected("'='");
  s->kind = StmtKind::kSetBlock;
  if (IsOp("|")) {
    auto f = ParseFilterExpr(nullptr);
    if (!f.ok()) return f.status();
    s->expr = std::move(*f);
  }
  TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
  open_blocks_.push_back("set");
  std::string found;
  TMPL_RETURN_IF_ERROR(ParseBody(s->body, {"endset"}, &found));
  open_blocks_.pop_back();
  out.push_back(std::move(s));
  return ExpectBlockEnd();
}

absl::Status Parser::ParseParams(Stmt& s) {
  TMPL_RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (!s.params.empty()) TMPL_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp(")")) break;
    auto n = ExpectName();
    if (!n.ok()) return n.status();
    s.params.push_back(*n);
    if (SkipOp("=")) {
      auto d = ParseExpr();
      if (!d.ok()) return d.status();
      s.defaults.push_back(std::move(*d));
    } else {
      s.defaults.push_back(nullptr);
    }
  }
  Next();
  return absl::OkStatus();
}

absl::Status Parser::ParseMacro(Body& out, int line, bool call_block) {
  auto s = std::make_unique<Stmt>();
  s->kind = call_block ? StmtKind::kCallBlock : StmtKind::kMacro;
  s->line = line;
  if (call_block) {
    if (IsOp("(")) TMPL_RETURN_IF_ERROR(ParseParams(*s));
    auto call = ParseExpr();
    if (!call.ok()) return call.status();
    if ((*call)->kind != ExprKind::kCall) return Fail("expected call");
    s->expr = std::move(*call);
  } else {
    auto n = ExpectName();
    if (!n.ok()) return n.status();
    s->name = *n;
    TMPL_RETURN_IF_ERROR(ParseParams(*s));
  }
  TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end = call_block ? "endcall" : "endmacro";
  open_blocks_.push_back(call_block ? "call" : "macro");
  std::string found;
  TMPL_RETURN_IF_ERROR(ParseBody(s->body, {end}, &found));
  open_blocks_.pop_back();
  if (!call_block && Cur().type == Tok::kName && Cur().value == s->name) Next();
  out.push_back(std::move(s));
  return ExpectBlockEnd();
}

absl::Status Parser::ParseFilterBlock(Body& out, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFilterBlock;
  s->line = line;
  auto f = ParseFilter(nullptr);
  if (!f.ok()) return f.status();
  auto chain = ParseFilterExpr(std::move(*f));
  if (!chain.ok()) return chain.status();
  s->expr = std::move(*chain);
  TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
  open_blocks_.push_back("filter");
  std::string found;
  TMPL_RETURN_IF_ERROR(ParseBody(s->body, {"endfilter"}, &found));
  open_blocks_.pop_back();
  out.push_back(std::move(s));
  return ExpectBlockEnd();
}


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
      std::string op;                                                        \
      for (const char* o : {__VA_ARGS__}) {                                  \
        if (IsOp(o)) op = o;                                                 \
      }                                                                      \
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

}  // namespace

absl::StatusOr<std::shared_ptr<const Body>> ParseTemplate(std::string_view source) {
  auto tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  Parser parser(std::move(*tokens));
  auto body = std::make_shared<Body>();
  std::string found;
  absl::Status s = parser.ParseBody(*body, {}, &found);
  if (!s.ok()) return s;
  return std::shared_ptr<const Body>(std::move(body));
}

}  // namespace tessera::tmpl
