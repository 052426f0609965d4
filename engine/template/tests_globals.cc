// jinja2's tests (`is defined`, `is string`, ...) and the globals of transformers' chat
// template environment (raise_exception, strftime_now) with jinja2's own (range, namespace,
// dict).
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "engine/template/interpreter.h"
#include "engine/template/strings.h"

namespace tessera::tmpl {
namespace {

absl::StatusOr<bool> Divisible(const Value& v, const Value& n) {
  if (!v.is_number() || !n.is_number()) return Error("TypeError", "divisibleby needs numbers");
  if (v.kind() == Kind::kFloat || n.kind() == Kind::kFloat) {
    if (n.as_double() == 0) return Error("ZeroDivisionError", "float modulo");
    return std::fmod(v.as_double(), n.as_double()) == 0;
  }
  if (n.as_int() == 0) return Error("ZeroDivisionError", "integer division or modulo by zero");
  if (n.as_int() == -1) return true;
  return v.as_int() % n.as_int() == 0;
}

}  // namespace

absl::StatusOr<bool> Interpreter::ApplyTest(const std::string& name, const Value& v, CallArgs& a) {
  Value arg = a.args.empty() ? (a.kwargs.empty() ? Value() : a.kwargs[0].second) : a.args[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "iterable") return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace()) || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace()) || v.is_undefined();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == Kind::kInt;
  if (name == "float") return v.kind() == Kind::kFloat;
  if (name == "boolean") return v.kind() == Kind::kBool;
  if (name == "true") return v.kind() == Kind::kBool && v.as_bool();
  if (name == "false") return v.kind() == Kind::kBool && !v.as_bool();
  if (name == "callable") return v.is_callable();
  if (name == "even" || name == "odd") {
    if (!v.is_number() || v.kind() == Kind::kFloat) {
      if (v.kind() == Kind::kFloat) return (std::fmod(v.as_double(), 2.0) == 0) == (name == "even");
      return Error("TypeError", "not all arguments converted during string formatting");
    }
    int64_t m = v.as_int() % 2;
    return name == "even" ? m == 0 : m != 0;
  }
  if (name == "divisibleby") return Divisible(v, arg);
  if (name == "eq" || name == "equalto" || name == "==") return Equals(v, arg);
  if (name == "ne" || name == "!=") return !Equals(v, arg);
  if (name == "lt" || name == "lessthan" || name == "<" || name == "gt" || name == "greaterthan" ||
      name == ">" || name == "le" || name == "<=" || name == "ge" || name == ">=") {
    if (v.is_undefined() || arg.is_undefined()) return Error("UndefinedError", "comparison with an undefined value");
    TMPL_ASSIGN_OR_RETURN(int c, Compare(v, arg));
    if (name == "lt" || name == "lessthan" || name == "<") return c < 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return c > 0;
    if (name == "le" || name == "<=") return c <= 0;
    return c >= 0;
  }
  if (name == "in") return Contains(arg, v);
  if (name == "sameas") {
    if (v.kind() != arg.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.kind() == Kind::kBool) return v.as_bool() == arg.as_bool();
    return Equals(v, arg) && (v.is_number() || v.is_string());
  }
  if (name == "lower") return PyLower(v.ToString()) == v.ToString();
  if (name == "upper") return PyUpper(v.ToString()) == v.ToString();
  if (name == "escaped") return false;
  return Error("TemplateRuntimeError", absl::StrCat("No test named '", name, "' found."));
}

namespace {

absl::StatusOr<Value> Range(Interpreter& in, CallArgs& a) {
  int64_t start = 0, stop = 0, step = 1;
  for (const Value& v : a.args) {
    if (v.kind() != Kind::kInt && v.kind() != Kind::kBool) {
      return Error("TypeError", absl::StrCat("'", v.TypeName(), "' object cannot be interpreted as an integer"));
    }
  }
  if (a.args.size() == 1) stop = a.args[0].as_int();
  else if (a.args.size() >= 2) { start = a.args[0].as_int(); stop = a.args[1].as_int(); }
  if (a.args.size() >= 3) step = a.args[2].as_int();
  if (a.args.empty() || a.args.size() > 3) return Error("TypeError", "range expected 1 to 3 arguments");
  if (step == 0) return Error("ValueError", "range() arg 3 must not be zero");
  double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
  if (count > 1e7) return Exhausted("range too large for the template step limit");
  TMPL_RETURN_IF_ERROR(in.Step(count > 0 ? static_cast<int64_t>(count) : 0));
  List out;
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  for (int64_t k = 0; k < n; ++k) out.push_back(Value::Int(start + k * step));
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> MakeMapping(Interpreter& in, CallArgs& a, bool ns) {
  auto d = std::make_shared<Dict>();
  if (ns) in.TrackNamespace(d);
  for (const Value& v : a.args) {
    if (!v.is_dict()) return Error("TypeError", "cannot convert positional argument to a dictionary");
    for (const auto& [k, x] : v.dict().entries()) d->Set(k, x);
  }
  for (auto& [k, v] : a.kwargs) d->Set(k, v);
  return Value::MakeDict(std::move(d), ns);
}

absl::StatusOr<Value> StrftimeNow(Interpreter& in, CallArgs& a) {
  if (a.args.empty() || !a.args[0].is_string()) return Error("TypeError", "strftime_now needs a format string");
  const std::string& fmt = a.args[0].str();
  if (fmt.size() > 1024) return Error("ValueError", "format too long");
  std::string buf(4096, '\0');
  std::tm tm = in.now();
  size_t n = fmt.empty() ? 0 : std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  buf.resize(n);
  return Value::String(std::move(buf));
}

}  // namespace

void AddGlobals(absl::flat_hash_map<std::string, Value>& g) {
  g["range"] = Value::Function("range", Range);
  g["namespace"] = Value::Function("namespace", [](Interpreter& in, CallArgs& a) { return MakeMapping(in, a, true); });
  g["dict"] = Value::Function("dict", [](Interpreter& in, CallArgs& a) { return MakeMapping(in, a, false); });
  g["raise_exception"] = Value::Function("raise_exception", [](Interpreter&, CallArgs& a) -> absl::StatusOr<Value> {
    // The template's own message, unchanged (transformers raises TemplateError(message)).
    std::string msg = a.args.empty() ? "" : a.args[0].ToString();
    return absl::InvalidArgumentError(msg);
  });
  g["strftime_now"] = Value::Function("strftime_now", StrftimeNow);
}

}  // namespace tessera::tmpl
