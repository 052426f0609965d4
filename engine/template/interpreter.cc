#include "engine/template/interpreter.h"

#include "absl/strings/str_cat.h"

namespace tessera::tmpl {

absl::Status Error(const std::string& type, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(type, ": ", message));
}

absl::Status Exhausted(const std::string& what) { return absl::ResourceExhaustedError(what); }

namespace {
absl::Status UndefinedError(const Value& v) { return Error("UndefinedError", v.undefined_message()); }
}  // namespace

absl::StatusOr<std::string> Interpreter::Render(const Body& body, const Value& context) {
  AddGlobals(globals_);
  auto root = std::make_shared<Scope>();
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict().entries()) root->vars[k] = v;
  }
  std::string out;
  auto flow = Exec(body, root, out);
  if (!flow.ok()) return flow.status();
  return out;
}

Value Interpreter::Lookup(const std::string& name, const std::shared_ptr<Scope>& scope) const {
  for (const Scope* s = scope.get(); s != nullptr; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  auto g = globals_.find(name);
  if (g != globals_.end()) return g->second;
  return Value::Undefined(absl::StrCat("'", name, "' is undefined"));
}

Interpreter::~Interpreter() {
  for (auto& ns : namespaces_) ns->Clear();
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Body& body, const std::shared_ptr<Scope>& scope,
                                                    std::string& out) {
  DepthGuard guard(depth_);
  if (depth_ > limits_.max_depth) return Exhausted("template exceeded its nesting depth limit");
  for (const auto& s : body) {
    TMPL_ASSIGN_OR_RETURN(Flow f, ExecStmt(*s, scope, out));
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecStmt(const Stmt& s, const std::shared_ptr<Scope>& scope,
                                                        std::string& out) {
  TMPL_RETURN_IF_ERROR(Step());
  switch (s.kind) {
    case StmtKind::kText:
      TMPL_RETURN_IF_ERROR(Append(out, s.text));
      return Flow::kNormal;
    case StmtKind::kOutput: {
      TMPL_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      TMPL_RETURN_IF_ERROR(Append(out, v.ToString()));
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        bool take = true;
        if (cond) {
          TMPL_ASSIGN_OR_RETURN(Value c, Eval(*cond, scope));
          take = c.Truthy();
        }
        if (take) return Exec(body, scope, out);
      }
      return Flow::kNormal;
    case StmtKind::kFor: return ExecFor(s, scope, out);
    case StmtKind::kSet: {
      TMPL_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      TMPL_RETURN_IF_ERROR(ExecSet(s, scope, std::move(v)));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      std::string text;
      TMPL_ASSIGN_OR_RETURN(Flow f, Exec(s.body, scope, text));
      (void)f;
      Value v = Value::String(std::move(text));
      if (s.expr) {
        Value saved = filter_subject_;
        filter_subject_ = v;
        auto r = Eval(*s.expr, scope);
        filter_subject_ = saved;
        if (!r.ok()) return r.status();
        v = std::move(*r);
      }
      TMPL_RETURN_IF_ERROR(ExecSet(s, scope, std::move(v)));
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      scope->vars[s.name] = MakeMacro(s, scope);
      return Flow::kNormal;
    case StmtKind::kCallBlock: {
      Value caller = MakeMacro(s, scope);
      const Expr& call = *s.expr;
      TMPL_ASSIGN_OR_RETURN(Value fn, Eval(*call.args[0], scope));
      CallArgs args;
      TMPL_RETURN_IF_ERROR(EvalArgs(call, 1, scope, args));
      args.kwargs.emplace_back("caller", caller);
      TMPL_ASSIGN_OR_RETURN(Value r, CallValue(fn, args));
      TMPL_RETURN_IF_ERROR(Append(out, r.ToString()));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      std::string text;
      TMPL_ASSIGN_OR_RETURN(Flow f, Exec(s.body, scope, text));
      (void)f;
      Value saved = filter_subject_;
      filter_subject_ = Value::String(std::move(text));
      auto r = Eval(*s.expr, scope);
      filter_subject_ = saved;
      if (!r.ok()) return r.status();
      TMPL_RETURN_IF_ERROR(Append(out, r->ToString()));
      return Flow::kNormal;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kScope: return Exec(s.body, scope, out);
  }
  return Flow::kNormal;
}

absl::Status Interpreter::ExecSet(const Stmt& s, const std::shared_ptr<Scope>& scope, Value value) {
  if (!s.attr.empty()) {
    Value target = Lookup(s.targets[0], scope);
    if (!target.is_namespace()) {
      return Error("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
    }
    target.mutable_dict().Set(s.attr, std::move(value));
    return absl::OkStatus();
  }
  return Assign(s.targets, scope, std::move(value));
}

absl::Status Interpreter::Assign(const std::vector<std::string>& targets, const std::shared_ptr<Scope>& scope,
                                 Value value) {
  if (targets.size() == 1) {
    scope->vars[targets[0]] = std::move(value);
    return absl::OkStatus();
  }
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(value));
  if (items.size() != targets.size()) {
    return Error("ValueError", items.size() > targets.size() ? "too many values to unpack"
                                                               : "not enough values to unpack");
  }
  for (size_t i = 0; i < items.size(); ++i) scope->vars[targets[i]] = items[i];
  return absl::OkStatus();
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope,
                                                       std::string& out) {
  TMPL_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, scope));
  TMPL_ASSIGN_OR_RETURN(List all, Iterate(iterable));
  List items;
  if (s.cond) {
    for (const Value& item : all) {
      auto iter_scope = std::make_shared<Scope>();
      iter_scope->parent = scope;
      TMPL_RETURN_IF_ERROR(Assign(s.targets, iter_scope, item));
      TMPL_ASSIGN_OR_RETURN(Value c, Eval(*s.cond, iter_scope));
      if (c.Truthy()) items.push_back(item);
    }
  } else {
    items = std::move(all);
  }
  if (items.empty()) return Exec(s.else_body, scope, out);
  const int64_t n = static_cast<int64_t>(items.size());
  Value cycle = Value::Function("cycle", nullptr);
  for (int64_t i = 0; i < n; ++i) {
    auto iter_scope = std::make_shared<Scope>();
    iter_scope->parent = scope;
    TMPL_RETURN_IF_ERROR(Assign(s.targets, iter_scope, items[i]));
    auto loop = std::make_shared<Dict>();
    loop->Set("index", Value::Int(i + 1));
    loop->Set("index0", Value::Int(i));
    loop->Set("revindex", Value::Int(n - i));
    loop->Set("revindex0", Value::Int(n - i - 1));
    loop->Set("first", Value::Bool(i == 0));
    loop->Set("last", Value::Bool(i == n - 1));
    loop->Set("length", Value::Int(n));
    loop->Set("depth", Value::Int(1));
    loop->Set("depth0", Value::Int(0));
    loop->Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    loop->Set("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    loop->Set("cycle", Value::Function("cycle", [i](Interpreter&, CallArgs& a) -> absl::StatusOr<Value> {
      if (a.args.empty()) return Error("TypeError", "no items for cycling given");
      return a.args[i % a.args.size()];
    }));
    iter_scope->vars["loop"] = Value::MakeDict(std::move(loop));
    TMPL_ASSIGN_OR_RETURN(Flow f, Exec(s.body, iter_scope, out));
    if (f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Interpreter::MakeMacro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  std::weak_ptr<Scope> closure = scope;
  const Stmt* stmt = &s;
  std::string name = s.kind == StmtKind::kMacro ? s.name : "caller";
  return Value::Function(name, [this, stmt, closure](Interpreter&, CallArgs& a) -> absl::StatusOr<Value> {
    auto frame = std::make_shared<Scope>();
    frame->parent = closure.lock();
    size_t pos = 0;
    for (size_t i = 0; i < stmt->params.size(); ++i) {
      bool found = false;
      Value v = a.Take(i, stmt->params[i], &found);
      if (found && i < a.args.size()) pos = i + 1;
      if (!found) {
        if (stmt->defaults[i]) {
          TMPL_ASSIGN_OR_RETURN(v, Eval(*stmt->defaults[i], frame));
        } else {
          v = Value::Undefined(absl::StrCat("parameter '", stmt->params[i], "' was not provided"));
        }
      }
      frame->vars[stmt->params[i]] = v;
    }
    List varargs(a.args.begin() + std::min(std::max(pos, stmt->params.size()), a.args.size()), a.args.end());
    frame->vars["varargs"] = Value::MakeList(std::move(varargs), true);
    auto kwargs = std::make_shared<Dict>();
    for (auto& [k, v] : a.kwargs) {
      if (k == "caller") frame->vars["caller"] = v;
      else kwargs->Set(k, v);
    }
    frame->vars["kwargs"] = Value::MakeDict(std::move(kwargs));
    std::string text;
    auto f = Exec(stmt->body, frame, text);
    if (!f.ok()) return f.status();
    return Value::String(std::move(text));
  });
}

absl::StatusOr<Value> Interpreter::CallValue(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) return UndefinedError(fn);
  if (!fn.is_callable() || !fn.callable().fn) {
    return Error("TypeError", absl::StrCat("'", fn.TypeName(), "' object is not callable"));
  }
  DepthGuard guard(depth_);
  if (depth_ > limits_.max_depth) return Exhausted("template exceeded its nesting depth limit");
  return fn.callable().fn(*this, args);
}

absl::Status Interpreter::EvalArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope,
                                   CallArgs& out) {
  for (size_t i = first; i < e.args.size(); ++i) {
    TMPL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], scope));
    out.args.push_back(std::move(v));
  }
  for (const auto& [k, ke] : e.kwargs) {
    TMPL_ASSIGN_OR_RETURN(Value v, Eval(*ke, scope));
    out.kwargs.emplace_back(k, std::move(v));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Interpreter::Eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  DepthGuard guard(depth_);
  if (depth_ > limits_.max_depth) return Exhausted("template exceeded its nesting depth limit");
  TMPL_RETURN_IF_ERROR(Step());
  TMPL_ASSIGN_OR_RETURN(Value v, EvalInner(e, scope));
  // Walking a value costs its weight; items shared many times would make it exponential.
  if (v.weight() > static_cast<uint64_t>(std::max<int64_t>(limits_.max_steps, 0))) {
    return Exhausted("template value exceeded the step limit in size");
  }
  return v;
}

absl::StatusOr<Value> Interpreter::EvalCall(const Expr& e, const std::shared_ptr<Scope>& scope) {
  const Expr& callee = *e.args[0];
  CallArgs args;
  if (callee.kind == ExprKind::kAttr) {
    TMPL_ASSIGN_OR_RETURN(Value obj, Eval(*callee.args[0], scope));
    if (obj.is_undefined()) return UndefinedError(obj);
    if (HasMethod(obj, callee.name)) {
      TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
      return CallMethod(*this, obj, callee.name, args);
    }
    TMPL_ASSIGN_OR_RETURN(Value fn, GetAttr(obj, callee.name));
    TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
    return CallValue(fn, args);
  }
  TMPL_ASSIGN_OR_RETURN(Value fn, Eval(callee, scope));
  TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
  return CallValue(fn, args);
}

absl::StatusOr<Value> Interpreter::EvalCompare(const Expr& e, const std::shared_ptr<Scope>& scope) {
  TMPL_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], scope));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    TMPL_ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1], scope));
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = Equals(left, right);
    else if (op == "!=") r = !Equals(left, right);
    else if (op == "in" || op == "notin") {
      TMPL_ASSIGN_OR_RETURN(r, Contains(right, left));
      if (op == "notin") r = !r;
    } else {
      if (left.is_undefined()) return UndefinedError(left);
      if (right.is_undefined()) return UndefinedError(right);
      TMPL_ASSIGN_OR_RETURN(int c, Compare(left, right));
      r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
    }
    if (!r) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Interpreter::EvalInner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case ExprKind::kConst: return e.constant;
    case ExprKind::kName: return Lookup(e.name, scope);
    case ExprKind::kAttr: {
      TMPL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      return GetAttr(obj, e.name);
    }
    case ExprKind::kItem: {
      TMPL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      TMPL_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], scope));
      return GetItem(obj, key);
    }
    case ExprKind::kSlice: {
      TMPL_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
      CallArgs parts;
      for (int i = 1; i <= 3; ++i) {
        if (e.args[i]) {
          TMPL_ASSIGN_OR_RETURN(Value p, Eval(*e.args[i], scope));
          parts.args.push_back(std::move(p));
        } else {
          parts.args.push_back(Value::None());
        }
      }
      return CallMethod(*this, obj, "__slice__", parts);
    }
    case ExprKind::kCall: return EvalCall(e, scope);
    case ExprKind::kFilter: {
      Value subject = filter_subject_;
      if (e.args[0]) {
        TMPL_ASSIGN_OR_RETURN(subject, Eval(*e.args[0], scope));
      }
      CallArgs args;
      TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
      return ApplyFilter(e.name, std::move(subject), args);
    }
    case ExprKind::kTest: {
      TMPL_ASSIGN_OR_RETURN(Value subject, Eval(*e.args[0], scope));
      CallArgs args;
      TMPL_RETURN_IF_ERROR(EvalArgs(e, 1, scope, args));
      TMPL_ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, subject, args));
      return Value::Bool(r != e.negated);
    }
    case ExprKind::kNot: {
      TMPL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      return Value::Bool(!v.Truthy());
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      TMPL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
      if (v.is_undefined()) return UndefinedError(v);
      if (!v.is_number()) return Error("TypeError", absl::StrCat("bad operand type for unary ", e.kind == ExprKind::kNeg ? "-" : "+", ": '", v.TypeName(), "'"));
      if (e.kind == ExprKind::kPos) return v.kind() == Kind::kBool ? Value::Int(v.as_int()) : v;
      if (v.kind() == Kind::kFloat) return Value::Float(-v.as_double());
      if (v.as_int() == INT64_MIN) return Error("OverflowError", "integer overflow");
      return Value::Int(-v.as_int());
    }
    case ExprKind::kBinary: {
      TMPL_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], scope));
      TMPL_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], scope));
      return BinaryOp(*this, e.name, a, b);
    }
    case ExprKind::kCompare: return EvalCompare(e, scope);
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      TMPL_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], scope));
      if (a.Truthy() == (e.kind == ExprKind::kOr)) return a;
      return Eval(*e.args[1], scope);
    }
    case ExprKind::kCond: {
      TMPL_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1], scope));
      if (c.Truthy()) return Eval(*e.args[0], scope);
      if (e.args[2]) return Eval(*e.args[2], scope);
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      for (const auto& a : e.args) {
        TMPL_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
        items.push_back(std::move(v));
      }
      Value list = Value::MakeList(std::move(items), e.kind == ExprKind::kTuple);
      if (list.depth() > static_cast<uint32_t>(limits_.max_depth)) return Exhausted("template values nested too deeply");
      return list;
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        TMPL_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], scope));
        TMPL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], scope));
        d->SetKey(k, std::move(v));
      }
      Value dict = Value::MakeDict(std::move(d));
      if (dict.depth() > static_cast<uint32_t>(limits_.max_depth)) return Exhausted("template values nested too deeply");
      return dict;
    }
  }
  return Value();
}

}  // namespace tessera::tmpl
