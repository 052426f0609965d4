// The parser of the template engine (internal): jinja2's grammar (jinja2/parser.py) for
// the statements and expressions chat templates use. Statements are in parser.cc,
// expressions in parser_expr.cc.
#ifndef TESSERA_ENGINE_TEMPLATE_PARSER_H_
#define TESSERA_ENGINE_TEMPLATE_PARSER_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/template/ast.h"
#include "engine/template/lexer.h"

namespace tessera::tmpl {

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
  // The current operator when it is one of `ops`, else "".
  std::string MatchOp(std::initializer_list<std::string_view> ops) const {
    if (Cur().type != Tok::kOp) return "";
    for (std::string_view o : ops) {
      if (Cur().value == o) return Cur().value;
    }
    return "";
  }
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

}  // namespace tessera::tmpl

#endif  // TESSERA_ENGINE_TEMPLATE_PARSER_H_
