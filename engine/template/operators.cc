// Attribute and item access, iteration, membership and arithmetic with Python's (and
// jinja2's sandbox) semantics.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/template/interpreter.h"
#include "engine/template/utf8_util.h"

namespace tessera::tmpl {
namespace {

Value NoAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined(absl::StrCat("'", obj.TypeRepr(), "' has no attribute '", name, "'"));
}

Value NoElement(const Value& obj, const Value& key) {
  return Value::Undefined(absl::StrCat(obj.TypeRepr(), " has no element ", key.Repr()));
}

absl::Status Undef(const Value& v) { return Error("UndefinedError", v.undefined_message()); }

}  // namespace

absl::StatusOr<Value> Interpreter::GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return Undef(obj);
  if (HasMethod(obj, name)) {
    Value self = obj;
    std::string method = name;
    return Value::Function(name, [self, method](Interpreter& in, CallArgs& a) {
      return CallMethod(in, self, method, a);
    });
  }
  if (obj.is_dict()) {
    const Value* v = obj.dict().Find(name);
    if (v != nullptr) return *v;
  }
  return NoAttribute(obj, name);
}

absl::StatusOr<Value> Interpreter::GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return Undef(obj);
  if (obj.is_dict() && key.is_string()) {
    const Value* v = obj.dict().Find(key.str());
    if (v != nullptr) return *v;
    if (HasMethod(obj, key.str())) return GetAttr(obj, key.str());
    return NoAttribute(obj, key.str());
  }
  if ((obj.is_list() || obj.is_string()) && (key.kind() == Kind::kInt || key.kind() == Kind::kBool)) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return NoElement(obj, key);
      return obj.list()[i];
    }
    auto chars = SplitChars(obj.str());
    int64_t n = static_cast<int64_t>(chars.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return NoElement(obj, key);
    return Value::String(std::string(chars[i]));
  }
  if (obj.is_dict() && !obj.is_namespace()) {
    const Value* v = obj.dict().FindKey(key);
    if (v != nullptr) return *v;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return NoElement(obj, key);
}

absl::StatusOr<List> Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return List{};
    case Kind::kList: return v.list();
    case Kind::kDict: {
      if (v.is_namespace()) break;
      List keys;
      for (size_t i = 0; i < v.dict().size(); ++i) keys.push_back(v.dict().KeyAt(i));
      return keys;
    }
    case Kind::kString: {
      List chars;
      for (auto c : SplitChars(v.str())) chars.push_back(Value::String(std::string(c)));
      return chars;
    }
    default: break;
  }
  return Error("TypeError", absl::StrCat("'", v.TypeName(), "' object is not iterable"));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (item.is_undefined()) return Undef(item);
    if (!item.is_string()) {
      return Error("TypeError", absl::StrCat("'in <string>' requires string as left operand, not ", item.TypeName()));
    }
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_dict() && !container.is_namespace()) {
    return container.dict().FindKey(item) != nullptr;
  }
  if (container.is_list()) {
    for (const Value& v : container.list()) {
      if (Equals(v, item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;
  return Error("TypeError", absl::StrCat("argument of type '", container.TypeName(), "' is not iterable"));
}

namespace {

absl::Status Unsupported(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && a.is_string()) {
    return Error("TypeError", absl::StrCat("can only concatenate str (not \"", b.TypeName(), "\") to str"));
  }
  if (op == "+" && a.is_list() && !a.is_tuple()) {
    return Error("TypeError", absl::StrCat("can only concatenate list (not \"", b.TypeName(), "\") to list"));
  }
  return Error("TypeError", absl::StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(),
                                         "' and '", b.TypeName(), "'"));
}

absl::StatusOr<Value> Repeat(Interpreter& in, const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value::String("") : Value::MakeList({}, seq.is_tuple());
  size_t unit = seq.is_string() ? seq.str().size() : seq.list().size();
  if (unit > 0 && static_cast<uint64_t>(times) > (1ull << 40) / unit) return Exhausted("template output exceeded its size limit");
  TMPL_RETURN_IF_ERROR(in.CheckSize(unit * times));
  TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(seq.is_string() ? 1 : unit * times)));
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return Value::MakeList(std::move(out), seq.is_tuple());
}

absl::StatusOr<Value> IntOp(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+") { if (__builtin_add_overflow(x, y, &r)) return Error("OverflowError", "integer overflow"); return Value::Int(r); }
  if (op == "-") { if (__builtin_sub_overflow(x, y, &r)) return Error("OverflowError", "integer overflow"); return Value::Int(r); }
  if (op == "*") { if (__builtin_mul_overflow(x, y, &r)) return Error("OverflowError", "integer overflow"); return Value::Int(r); }
  if (op == "/") {
    if (y == 0) return Error("ZeroDivisionError", "division by zero");
    return Value::Float(static_cast<double>(x) / static_cast<double>(y));
  }
  if (op == "//" || op == "%") {
    if (y == 0) return Error("ZeroDivisionError", op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return Error("OverflowError", "integer overflow");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) { q -= 1; m += y; }
    return Value::Int(op == "//" ? q : m);
  }
  // **
  if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
  int64_t result = 1, base = x;
  while (y > 0) {
    if (y & 1) { if (__builtin_mul_overflow(result, base, &result)) return Error("OverflowError", "integer overflow"); }
    y >>= 1;
    if (y > 0 && __builtin_mul_overflow(base, base, &base)) return Error("OverflowError", "integer overflow");
  }
  return Value::Int(result);
}

absl::StatusOr<Value> FloatOp(const std::string& op, double x, double y) {
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "**") return Value::Float(std::pow(x, y));
  if (y == 0) return Error("ZeroDivisionError", "float division by zero");
  if (op == "/") return Value::Float(x / y);
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  if (op == "%") return Value::Float(m);
  return Value::Float(std::floor(x / y));
}

}  // namespace

absl::StatusOr<Value> PercentFormat(Interpreter& in, const std::string& fmt, const Value& args);

absl::StatusOr<Value> BinaryOp(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.ToString() + b.ToString();
    TMPL_RETURN_IF_ERROR(in.CheckSize(s.size()));
    return Value::String(std::move(s));
  }
  if (a.is_undefined()) return Undef(a);
  if (b.is_undefined()) return Undef(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return FloatOp(op, a.as_double(), b.as_double());
    return IntOp(op, a.as_int(), b.as_int());
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    TMPL_RETURN_IF_ERROR(in.CheckSize(a.str().size() + b.str().size()));
    // Markup + str escapes the str (and str + Markup likewise); the sum is Markup.
    if (a.is_markup() || b.is_markup()) {
      return Value::Markup((a.is_markup() ? a.str() : HtmlEscape(a.str())) +
                           (b.is_markup() ? b.str() : HtmlEscape(b.str())));
    }
    return Value::String(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(a.list().size() + b.list().size())));
    List out = a.list();
    out.insert(out.end(), b.list().begin(), b.list().end());
    return Value::MakeList(std::move(out), a.is_tuple());
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.kind() == Kind::kInt || b.kind() == Kind::kBool)) {
    return Repeat(in, a, b.as_int());
  }
  if (op == "*" && (b.is_string() || b.is_list()) && (a.kind() == Kind::kInt || a.kind() == Kind::kBool)) {
    return Repeat(in, b, a.as_int());
  }
  if (op == "%" && a.is_string()) return PercentFormat(in, a.str(), b);
  return Unsupported(op, a, b);
}

}  // namespace tessera::tmpl
