// Statements of the template grammar, and the entry point.
#include "engine/template/parser.h"

#include "absl/strings/str_join.h"
#include "engine/template/interpreter.h"

namespace tessera::tmpl {

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
