// Methods of str, dict and list that templates call, slicing, and `%` formatting. The
// sandbox is immutable: mutating methods fail as jinja2's ImmutableSandboxedEnvironment does.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/template/interpreter.h"
#include "engine/template/strings.h"
#include "engine/template/utf8_util.h"

namespace tessera::tmpl {
namespace {

const char* kStrMethods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                             "replace", "upper", "lower", "title", "capitalize", "find", "rfind",
                             "count", "format", "join", "isdigit", "isalpha", "isalnum", "isspace",
                             "isupper", "islower", "splitlines", "removeprefix", "removesuffix", "index"};
const char* kDictMethods[] = {"items", "keys", "values", "get", "pop", "update", "setdefault", "clear",
                              "popitem", "copy"};
const char* kDictUnsafe[] = {"pop", "update", "setdefault", "clear", "popitem"};
const char* kListMethods[] = {"index", "count", "append", "extend", "insert", "pop", "remove", "reverse",
                              "sort", "clear", "copy"};
const char* kListUnsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};

template <size_t N>
bool In(const char* (&names)[N], const std::string& name) {
  return std::find_if(std::begin(names), std::end(names), [&](const char* n) { return name == n; }) !=
         std::end(names);
}

absl::Status Unsafe(const Value& obj, const std::string& name) {
  return Error("SecurityError", absl::StrCat("access to attribute '", name, "' of '", obj.TypeName(),
                                             "' object is unsafe."));
}

absl::StatusOr<int64_t> IntArg(const Value& v, int64_t def) {
  if (v.is_undefined() || v.is_none()) return def;
  if (v.kind() != Kind::kInt && v.kind() != Kind::kBool) {
    return Error("TypeError", absl::StrCat("'", v.TypeName(), "' object cannot be interpreted as an integer"));
  }
  return v.as_int();
}

absl::StatusOr<Value> Slice(Interpreter& in, const Value& obj, CallArgs& a) {
  if (obj.is_undefined()) return Error("UndefinedError", obj.undefined_message());
  if (!obj.is_list() && !obj.is_string()) {
    return Error("TypeError", absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
  }
  std::vector<std::string_view> chars;
  if (obj.is_string()) chars = SplitChars(obj.str());
  int64_t n = obj.is_string() ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.list().size());
  TMPL_ASSIGN_OR_RETURN(int64_t step, IntArg(a.args[2], 1));
  if (step == 0) return Error("ValueError", "slice step cannot be zero");
  auto norm = [&](const Value& v, int64_t def) -> absl::StatusOr<int64_t> {
    TMPL_ASSIGN_OR_RETURN(int64_t i, IntArg(v, def));
    if (v.is_none() || v.is_undefined()) return def;
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  TMPL_ASSIGN_OR_RETURN(int64_t start, norm(a.args[0], step > 0 ? 0 : n - 1));
  TMPL_ASSIGN_OR_RETURN(int64_t stop, norm(a.args[1], step > 0 ? n : -1));
  TMPL_RETURN_IF_ERROR(in.Step(std::max<int64_t>(0, (stop - start) / step)));
  std::string s;
  List l;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is_string()) s += chars[i];
    else l.push_back(obj.list()[i]);
  }
  if (obj.is_string()) return Value::String(std::move(s));
  return Value::MakeList(std::move(l), obj.is_tuple());
}

absl::StatusOr<Value> StrFormat(Interpreter& in, const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') { out += '}'; ++i; continue; }
    if (c != '{') { out += c; continue; }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') { out += '{'; ++i; continue; }
    size_t end = fmt.find('}', i);
    if (end == std::string::npos) return Error("ValueError", "Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, end - i - 1);
    size_t colon = field.find_first_of(":!");
    if (colon != std::string::npos) field = field.substr(0, colon);
    Value v;
    if (field.empty()) {
      if (auto_index >= a.args.size()) return Error("IndexError", "Replacement index out of range for positional args tuple");
      v = a.args[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t k = std::stoul(field.substr(0, 9));
      if (k >= a.args.size()) return Error("IndexError", "Replacement index out of range for positional args tuple");
      v = a.args[k];
    } else {
      bool found = false;
      v = a.Take(SIZE_MAX, field, &found);
      if (!found) return Error("KeyError", "'" + field + "'");
    }
    out += v.ToString();
    TMPL_RETURN_IF_ERROR(in.CheckSize(out.size()));
    i = end;
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> StrStartsEnds(const std::string& s, const Value& arg, bool starts) {
  List options = arg.is_list() ? arg.list() : List{arg};
  for (const Value& o : options) {
    if (!o.is_string()) {
      return Error("TypeError", absl::StrCat(starts ? "startswith" : "endswith",
                                             " first arg must be str or a tuple of str, not ", o.TypeName()));
    }
    const std::string& p = o.str();
    bool hit = p.size() <= s.size() && (starts ? s.compare(0, p.size(), p) == 0
                                               : s.compare(s.size() - p.size(), p.size(), p) == 0);
    if (hit) return Value::Bool(true);
  }
  return Value::Bool(false);
}

absl::StatusOr<std::string> StrArg(const Value& v, const char* method) {
  if (!v.is_string()) {
    return Error("TypeError", absl::StrCat(method, " arg must be None or str"));
  }
  return v.str();
}

List Strings(const std::vector<std::string>& parts) {
  List out;
  for (const auto& p : parts) out.push_back(Value::String(p));
  return out;
}

absl::StatusOr<Value> StrMethod(Interpreter& in, const std::string& s, const std::string& name, CallArgs& a) {
  Value a0 = a.args.size() > 0 ? a.args[0] : Value();
  Value a1 = a.args.size() > 1 ? a.args[1] : Value();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    std::string chars;
    bool has = !a0.is_undefined() && !a0.is_none();
    if (has) { TMPL_ASSIGN_OR_RETURN(chars, StrArg(a0, name.c_str())); }
    return Value::String(PyStrip(s, has ? &chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Value sepv = a.Take(0, "sep");
    Value maxv = a.Take(1, "maxsplit");
    TMPL_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(maxv, -1));
    std::string sep;
    bool has = !sepv.is_undefined() && !sepv.is_none();
    if (has) {
      TMPL_ASSIGN_OR_RETURN(sep, StrArg(sepv, name.c_str()));
      if (sep.empty()) return Error("ValueError", "empty separator");
    }
    auto parts = name == "split" ? PySplit(s, has ? &sep : nullptr, maxsplit) : PyRSplit(s, has ? &sep : nullptr, maxsplit);
    TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(parts.size())));
    return Value::MakeList(Strings(parts));
  }
  if (name == "startswith" || name == "endswith") return StrStartsEnds(s, a0, name == "startswith");
  if (name == "replace") {
    if (!a0.is_string() || !a1.is_string()) return Error("TypeError", "replace() arguments must be str");
    TMPL_ASSIGN_OR_RETURN(int64_t count, IntArg(a.args.size() > 2 ? a.args[2] : Value(), -1));
    std::string r = PyReplace(s, a0.str(), a1.str(), count);
    TMPL_RETURN_IF_ERROR(in.CheckSize(r.size()));
    return Value::String(std::move(r));
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "format") return StrFormat(in, s, a);
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    if (!a0.is_string()) return Error("TypeError", "must be str, not " + a0.TypeName());
    if (name == "count") {
      if (a0.str().empty()) return Value::Int(static_cast<int64_t>(PyLen(s) + 1));
      int64_t n = 0;
      for (size_t p = s.find(a0.str()); p != std::string::npos; p = s.find(a0.str(), p + a0.str().size())) ++n;
      return Value::Int(n);
    }
    size_t at = name == "rfind" ? s.rfind(a0.str()) : s.find(a0.str());
    if (at == std::string::npos) {
      if (name == "index") return Error("ValueError", "substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(PyLen(std::string_view(s).substr(0, at))));
  }
  if (name == "join") {
    TMPL_ASSIGN_OR_RETURN(List items, Iterate(a0));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) return Error("TypeError", absl::StrCat("sequence item ", i, ": expected str instance, ", items[i].TypeName(), " found"));
      if (i) out += s;
      out += items[i].str();
      TMPL_RETURN_IF_ERROR(in.CheckSize(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (name == "splitlines") return Value::MakeList(Strings(PySplitLines(s)));
  if (name == "removeprefix" || name == "removesuffix") {
    if (!a0.is_string()) return Error("TypeError", name + "() argument must be str");
    const std::string& p = a0.str();
    if (name == "removeprefix" && s.compare(0, p.size(), p) == 0) return Value::String(s.substr(p.size()));
    if (name == "removesuffix" && p.size() <= s.size() && !p.empty() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
      return Value::String(s.substr(0, s.size() - p.size()));
    }
    return Value::String(s);
  }
  // is* predicates (ASCII classes; whitespace per Python).
  if (s.empty()) return Value::Bool(false);
  auto all = [&](auto pred) { return Value::Bool(std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)); })); };
  if (name == "isdigit") return all(::isdigit);
  if (name == "isalpha") return all(::isalpha);
  if (name == "isalnum") return all(::isalnum);
  if (name == "isspace") return Value::Bool(PyStrip(s, nullptr, true, true).empty());
  if (name == "isupper") return Value::Bool(PyUpper(s) == s && PyLower(s) != s);
  if (name == "islower") return Value::Bool(PyLower(s) == s && PyUpper(s) != s);
  return Error("AttributeError", "'str' object has no attribute '" + name + "'");
}

List DictItems(const Dict& d) {
  List out;
  for (size_t i = 0; i < d.size(); ++i) out.push_back(Value::MakeList({d.KeyAt(i), d.entries()[i].second}, true));
  return out;
}

}  // namespace

bool HasMethod(const Value& obj, const std::string& name) {
  if (name == "__slice__") return true;
  if (obj.is_string()) return In(kStrMethods, name);
  if (obj.is_dict() && !obj.is_namespace()) return In(kDictMethods, name);
  if (obj.is_list() && !obj.is_tuple()) return In(kListMethods, name);
  if (obj.is_tuple()) return name == "index" || name == "count";
  return false;
}

absl::StatusOr<Value> CallMethod(Interpreter& in, const Value& obj, const std::string& name, CallArgs& a) {
  if (name == "__slice__") return Slice(in, obj, a);
  if (obj.is_string()) return StrMethod(in, obj.str(), name, a);
  if (obj.is_dict()) {
    if (In(kDictUnsafe, name)) return Unsafe(obj, name);
    const Dict& d = obj.dict();
    TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(d.size())));
    if (name == "items") return Value::MakeList(DictItems(d));
    if (name == "keys" || name == "values") {
      List out;
      for (size_t i = 0; i < d.size(); ++i) out.push_back(name == "keys" ? d.KeyAt(i) : d.entries()[i].second);
      return Value::MakeList(std::move(out));
    }
    if (name == "copy") return obj;
    if (name == "get") {
      Value key = a.args.empty() ? Value() : a.args[0];
      Value def = a.args.size() > 1 ? a.args[1] : Value::None();
      const Value* v = d.FindKey(key);
      return v ? *v : def;
    }
  }
  if (obj.is_list()) {
    if (In(kListUnsafe, name)) return Unsafe(obj, name);
    if (name == "copy") return obj;
    Value x = a.args.empty() ? Value() : a.args[0];
    int64_t count = 0;
    for (size_t i = 0; i < obj.list().size(); ++i) {
      if (Equals(obj.list()[i], x)) {
        if (name == "index") return Value::Int(static_cast<int64_t>(i));
        ++count;
      }
    }
    if (name == "index") return Error("ValueError", x.Repr() + " is not in list");
    return Value::Int(count);
  }
  return Error("AttributeError", absl::StrCat("'", obj.TypeName(), "' object has no attribute '", name, "'"));
}

absl::StatusOr<Value> PercentFormat(Interpreter& in, const std::string& fmt, const Value& args) {
  List values = args.is_tuple() ? args.list() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') { out += fmt[i]; continue; }
    if (i + 1 >= fmt.size()) return Error("ValueError", "incomplete format");
    char c = fmt[++i];
    if (c == '%') { out += '%'; continue; }
    if (next >= values.size()) return Error("TypeError", "not enough arguments for format string");
    const Value& v = values[next++];
    if (c == 's') out += v.ToString();
    else if (c == 'r') out += v.Repr();
    else if (c == 'd' || c == 'i') {
      if (!v.is_number()) return Error("TypeError", "%d format: a real number is required, not " + v.TypeName());
      out += std::to_string(v.kind() == Kind::kFloat ? static_cast<int64_t>(v.as_double()) : v.as_int());
    } else {
      return Error("ValueError", absl::StrCat("unsupported format character '", std::string(1, c), "'"));
    }
    TMPL_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  if (next < values.size()) return Error("TypeError", "not all arguments converted during string formatting");
  return Value::String(std::move(out));
}

}  // namespace tessera::tmpl
