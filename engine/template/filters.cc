// jinja2's built-in filters as chat templates use them, plus transformers' `tojson`.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "engine/template/interpreter.h"
#include "engine/template/strings.h"
#include "engine/template/utf8_util.h"

namespace tessera::tmpl {
namespace {

using Filter = absl::StatusOr<Value> (*)(Interpreter&, Value&, CallArgs&);

// Attribute paths of selectattr/map/sort/...: "a.b" or "0".
absl::StatusOr<Value> AttrPath(Interpreter& in, Value v, const std::string& path) {
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (v.is_undefined()) return v;
    TMPL_ASSIGN_OR_RETURN(v, numeric ? in.GetItem(v, Value::Int(std::stoll(part.substr(0, 18))))
                                     : in.GetItem(v, Value::String(part)));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return v;
}

absl::StatusOr<Value> FTojson(Interpreter& in, Value& v, CallArgs& a) {
  JsonOptions o;
  Value indent = a.Take(0, "indent");
  Value ensure_ascii = a.Take(1, "ensure_ascii");
  Value separators = a.Take(2, "separators");
  Value sort_keys = a.Take(3, "sort_keys");
  if (!indent.is_undefined() && !indent.is_none()) {
    o.has_indent = true;
    o.item_sep = ",";
    if (indent.is_string()) o.indent = indent.str();
    else if (indent.kind() == Kind::kInt) o.indent = std::string(std::max<int64_t>(0, std::min<int64_t>(indent.as_int(), 1024)), ' ');
    else return Error("TypeError", "indent must be an int or a string");
  }
  o.ensure_ascii = ensure_ascii.Truthy();
  o.max_bytes = in.max_output_bytes();
  o.sort_keys = sort_keys.Truthy();
  if (separators.is_list() && separators.list().size() == 2) {
    o.item_sep = separators.list()[0].ToString();
    o.key_sep = separators.list()[1].ToString();
  }
  TMPL_ASSIGN_OR_RETURN(std::string s, ToJson(v, o));
  TMPL_RETURN_IF_ERROR(in.CheckSize(s.size()));
  return Value::String(std::move(s));
}

absl::StatusOr<Value> FTrim(Interpreter&, Value& v, CallArgs& a) {
  Value chars = a.Take(0, "chars");
  std::string c = chars.is_string() ? chars.str() : "";
  return Value::String(PyStrip(v.ToString(), chars.is_string() ? &c : nullptr, true, true));
}

absl::StatusOr<Value> FLength(Interpreter&, Value& v, CallArgs&) {
  if (v.is_string()) return Value::Int(static_cast<int64_t>(PyLen(v.str())));
  if (v.is_generator()) return Error("TypeError", "object of type 'generator' has no len()");
  if (v.is_list()) return Value::Int(static_cast<int64_t>(v.list().size()));
  if (v.is_dict() && !v.is_namespace()) return Value::Int(static_cast<int64_t>(v.dict().size()));
  if (v.is_undefined()) return Value::Int(0);
  return Error("TypeError", absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
}

absl::StatusOr<Value> FDefault(Interpreter&, Value& v, CallArgs& a) {
  Value def = a.Take(0, "default_value");
  if (def.is_undefined()) def = Value::String("");
  bool boolean = a.Take(1, "boolean").Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy())) return def;
  return v;
}

absl::StatusOr<Value> FItems(Interpreter& in, Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::MakeList({});
  if (!v.is_dict() || v.is_namespace()) return Error("TypeError", "Can only get item pairs from a mapping.");
  CallArgs none;
  return CallMethod(in, v, "items", none);
}

absl::StatusOr<Value> FJoin(Interpreter& in, Value& v, CallArgs& a) {
  Value sep = a.Take(0, "d");
  Value attr = a.Take(1, "attribute");
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep.ToString();
    Value item = items[i];
    if (attr.is_string()) { TMPL_ASSIGN_OR_RETURN(item, AttrPath(in, item, attr.str())); }
    out += item.ToString();
    TMPL_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(items.size())));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FSelect(Interpreter& in, Value& v, CallArgs& a, bool attr_mode, bool select) {
  if (!v.Truthy()) return Value::Generator({});  // jinja2 walks the value only when it is truthy
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(items.size())));
  size_t first = 0;
  std::string attr;
  if (attr_mode) {
    if (a.args.empty() || !a.args[0].is_string()) return Error("TypeError", "selectattr needs an attribute name");
    attr = a.args[0].str();
    first = 1;
  }
  std::string test;
  if (a.args.size() > first) test = a.args[first].ToString();
  CallArgs test_args;
  for (size_t i = first + 1; i < a.args.size(); ++i) test_args.args.push_back(a.args[i]);
  List out;
  for (const Value& item : items) {
    Value probe = item;
    if (attr_mode) { TMPL_ASSIGN_OR_RETURN(probe, AttrPath(in, item, attr)); }
    bool r;
    if (test.empty()) {
      r = probe.Truthy();
    } else {
      CallArgs ta = test_args;
      TMPL_ASSIGN_OR_RETURN(r, in.ApplyTest(test, probe, ta));
    }
    if (r == select) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

absl::StatusOr<Value> FSelectattr(Interpreter& in, Value& v, CallArgs& a) { return FSelect(in, v, a, true, true); }
absl::StatusOr<Value> FRejectattr(Interpreter& in, Value& v, CallArgs& a) { return FSelect(in, v, a, true, false); }
absl::StatusOr<Value> FSelectF(Interpreter& in, Value& v, CallArgs& a) { return FSelect(in, v, a, false, true); }
absl::StatusOr<Value> FReject(Interpreter& in, Value& v, CallArgs& a) { return FSelect(in, v, a, false, false); }

absl::StatusOr<Value> FMap(Interpreter& in, Value& v, CallArgs& a) {
  if (!v.Truthy()) return Value::Generator({});
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(items.size())));
  bool has_attr = false;
  Value attr = a.Take(SIZE_MAX, "attribute", &has_attr);
  Value def = a.Take(SIZE_MAX, "default");
  List out;
  if (has_attr) {
    for (const Value& item : items) {
      TMPL_ASSIGN_OR_RETURN(Value r, AttrPath(in, item, attr.ToString()));
      if (r.is_undefined() && !def.is_undefined()) r = def;
      out.push_back(std::move(r));
    }
    return Value::Generator(std::move(out));
  }
  if (a.args.empty()) return Error("FilterArgumentError", "map requires a filter argument");
  std::string filter = a.args[0].ToString();
  for (const Value& item : items) {
    CallArgs fa;
    fa.args.assign(a.args.begin() + 1, a.args.end());
    fa.kwargs = a.kwargs;
    TMPL_ASSIGN_OR_RETURN(Value r, in.ApplyFilter(filter, item, fa));
    out.push_back(std::move(r));
  }
  return Value::Generator(std::move(out));
}

absl::StatusOr<Value> FFirst(Interpreter&, Value& v, CallArgs&) {
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> FLast(Interpreter&, Value& v, CallArgs&) {
  if (v.is_generator()) return Error("TypeError", "'generator' object is not reversible");
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> FList(Interpreter&, Value& v, CallArgs&) {
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  return Value::MakeList(std::move(items));
}

absl::StatusOr<Value> FString(Interpreter&, Value& v, CallArgs&) { return Value::String(v.ToString()); }
absl::StatusOr<Value> FSafe(Interpreter&, Value& v, CallArgs&) { return Value::Markup(v.ToString()); }
absl::StatusOr<Value> FLower(Interpreter&, Value& v, CallArgs&) { return Value::String(PyLower(v.ToString())); }
absl::StatusOr<Value> FUpper(Interpreter&, Value& v, CallArgs&) { return Value::String(PyUpper(v.ToString())); }
absl::StatusOr<Value> FCapitalize(Interpreter&, Value& v, CallArgs&) { return Value::String(PyCapitalize(v.ToString())); }

absl::StatusOr<Value> FTitle(Interpreter&, Value& v, CallArgs&) {
  // jinja2: words start after whitespace, '-', and opening brackets.
  std::string s = v.ToString(), out;
  bool start = true;
  for (auto ch : s) {
    std::string one(1, ch);
    out += start ? PyUpper(one) : PyLower(one);
    start = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '-' || ch == '(' || ch == '{' || ch == '[' || ch == '<';
  }
  return Value::String(out);
}

absl::StatusOr<Value> FReplace(Interpreter& in, Value& v, CallArgs& a) {
  Value old = a.Take(0, "old"), repl = a.Take(1, "new"), count = a.Take(2, "count");
  std::string r = PyReplace(v.ToString(), old.ToString(), repl.ToString(),
                            count.kind() == Kind::kInt ? count.as_int() : -1);
  TMPL_RETURN_IF_ERROR(in.CheckSize(r.size()));
  return Value::String(std::move(r));
}

absl::StatusOr<Value> FInt(Interpreter&, Value& v, CallArgs& a) {
  Value def = a.Take(0, "default");
  if (def.is_undefined()) def = Value::Int(0);
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return Value::Int(v.as_int());
  if (v.kind() == Kind::kFloat) {
    double d = v.as_double();
    if (std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::Int(static_cast<int64_t>(d));
    return def;
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.str(), nullptr, true, true);
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == 0 && errno == 0) return Value::Int(i);
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == 0 && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::Int(static_cast<int64_t>(d));
  }
  return def;
}

absl::StatusOr<Value> FFloat(Interpreter&, Value& v, CallArgs& a) {
  Value def = a.Take(0, "default");
  if (def.is_undefined()) def = Value::Float(0.0);
  if (v.is_number()) return Value::Float(v.as_double());
  if (v.is_string()) {
    std::string s = PyStrip(v.str(), nullptr, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == 0) return Value::Float(d);
  }
  return def;
}

absl::StatusOr<Value> FRound(Interpreter&, Value& v, CallArgs& a) {
  Value prec = a.Take(0, "precision");
  Value method = a.Take(1, "method");
  int64_t p = prec.kind() == Kind::kInt ? prec.as_int() : 0;
  std::string m = method.is_string() ? method.str() : "common";
  if (!v.is_number()) return Error("TypeError", "type " + v.TypeName() + " doesn't define __round__ method");
  if (m == "common" && v.kind() != Kind::kFloat) return Value::Int(v.as_int());
  double scale = std::pow(10.0, static_cast<double>(p));
  if (m == "common" && p >= 0 && p < 300) {
    // Python's round(): half to even on the exact binary value, as printf rounds.
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(p), v.as_double());
    return Value::Float(std::strtod(buf, nullptr));
  }
  double x = v.as_double() * scale;
  double r = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value::Float(r / scale);
}

absl::StatusOr<Value> FAbs(Interpreter&, Value& v, CallArgs&) {
  if (v.kind() == Kind::kFloat) return Value::Float(std::fabs(v.as_double()));
  if (v.is_number()) return Value::Int(v.as_int() < 0 ? -v.as_int() : v.as_int());
  return Error("TypeError", "bad operand type for abs(): '" + v.TypeName() + "'");
}

absl::StatusOr<Value> SortKey(Interpreter& in, const Value& item, const Value& attr, bool case_sensitive) {
  Value k = item;
  if (attr.is_string()) { TMPL_ASSIGN_OR_RETURN(k, AttrPath(in, item, attr.str())); }
  if (!case_sensitive && k.is_string()) return Value::String(PyLower(k.str()));
  return k;
}

absl::StatusOr<Value> FSort(Interpreter& in, Value& v, CallArgs& a) {
  bool reverse = a.Take(0, "reverse").Truthy();
  bool case_sensitive = a.Take(1, "case_sensitive").Truthy();
  Value attr = a.Take(2, "attribute");
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(items.size())));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    TMPL_ASSIGN_OR_RETURN(Value k, SortKey(in, item, attr, case_sensitive));
    keyed.emplace_back(std::move(k), item);
  }
  absl::Status err;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    auto c = reverse ? Compare(y.first, x.first) : Compare(x.first, y.first);
    if (!c.ok()) { err = c.status(); return false; }
    return *c < 0;
  });
  if (!err.ok()) return err;
  List out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> FDictsort(Interpreter& in, Value& v, CallArgs& a) {
  bool case_sensitive = a.Take(0, "case_sensitive").Truthy();
  Value by = a.Take(1, "by");
  bool reverse = a.Take(2, "reverse").Truthy();
  if (!v.is_dict()) return Error("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
  CallArgs none;
  TMPL_ASSIGN_OR_RETURN(Value items, CallMethod(in, v, "items", none));
  CallArgs sa;
  sa.kwargs = {{"reverse", Value::Bool(reverse)}, {"case_sensitive", Value::Bool(case_sensitive)},
               {"attribute", Value::String(by.is_string() && by.str() == "value" ? "1" : "0")}};
  return FSort(in, items, sa);
}

absl::StatusOr<Value> FUnique(Interpreter& in, Value& v, CallArgs& a) {
  bool case_sensitive = a.Take(0, "case_sensitive").Truthy();
  Value attr = a.Take(1, "attribute");
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  TMPL_RETURN_IF_ERROR(in.Step(static_cast<int64_t>(items.size() * items.size() / 16 + items.size())));
  List out, keys;
  for (const Value& item : items) {
    TMPL_ASSIGN_OR_RETURN(Value k, SortKey(in, item, attr, case_sensitive));
    if (std::none_of(keys.begin(), keys.end(), [&](const Value& x) { return Equals(x, k); })) {
      keys.push_back(k);
      out.push_back(item);
    }
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> FMinMax(Interpreter& in, Value& v, CallArgs& a, bool max) {
  bool case_sensitive = a.Take(0, "case_sensitive").Truthy();
  Value attr = a.Take(1, "attribute");
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  if (items.empty()) return Value::Undefined(std::string("No aggregated item, sequence was empty."));
  Value best = items[0];
  TMPL_ASSIGN_OR_RETURN(Value best_key, SortKey(in, best, attr, case_sensitive));
  for (size_t i = 1; i < items.size(); ++i) {
    TMPL_ASSIGN_OR_RETURN(Value k, SortKey(in, items[i], attr, case_sensitive));
    TMPL_ASSIGN_OR_RETURN(int c, Compare(k, best_key));
    if (max ? c > 0 : c < 0) { best = items[i]; best_key = k; }
  }
  return best;
}
absl::StatusOr<Value> FMax(Interpreter& in, Value& v, CallArgs& a) { return FMinMax(in, v, a, true); }
absl::StatusOr<Value> FMin(Interpreter& in, Value& v, CallArgs& a) { return FMinMax(in, v, a, false); }

absl::StatusOr<Value> FSum(Interpreter& in, Value& v, CallArgs& a) {
  Value attr = a.Take(0, "attribute");
  Value total = a.Take(1, "start");
  if (total.is_undefined()) total = Value::Int(0);
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  for (const Value& item : items) {
    Value x = item;
    if (attr.is_string()) { TMPL_ASSIGN_OR_RETURN(x, AttrPath(in, item, attr.str())); }
    TMPL_ASSIGN_OR_RETURN(total, BinaryOp(in, "+", total, x));
  }
  return total;
}

absl::StatusOr<Value> FReverse(Interpreter&, Value& v, CallArgs&) {
  if (v.is_string()) {
    auto chars = SplitChars(v.str());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value::String(out);
  }
  TMPL_ASSIGN_OR_RETURN(List items, Iterate(v));
  std::reverse(items.begin(), items.end());
  return Value::MakeList(std::move(items));
}

absl::StatusOr<Value> FIndent(Interpreter& in, Value& v, CallArgs& a) {
  Value width = a.Take(0, "width");
  bool first = a.Take(1, "first").Truthy();
  bool blank = a.Take(2, "blank").Truthy();
  std::string ind = width.is_string() ? width.str()
                    : std::string(width.kind() == Kind::kInt ? std::clamp<int64_t>(width.as_int(), 0, 4096) : 4, ' ');
  std::string s = v.ToString() + "\n";
  std::vector<std::string> lines = PySplitLines(s);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (first) rv = ind + rv;
  TMPL_RETURN_IF_ERROR(in.CheckSize(rv.size()));
  return Value::String(std::move(rv));
}

}  // namespace

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

absl::StatusOr<Value> FEscape(Interpreter&, Value& v, CallArgs&) {
  if (v.is_markup()) return v;
  return Value::Markup(HtmlEscape(v.ToString()));
}

absl::StatusOr<Value> FFormat(Interpreter& in, Value& v, CallArgs& a) {
  return BinaryOp(in, "%", Value::String(v.ToString()), Value::MakeList(a.args, true));
}

absl::StatusOr<Value> FAttr(Interpreter& in, Value& v, CallArgs& a) {
  return in.GetAttr(v, a.args.empty() ? "" : a.args[0].ToString());
}

absl::StatusOr<Value> FWordcount(Interpreter&, Value& v, CallArgs&) {
  return Value::Int(static_cast<int64_t>(PySplit(v.ToString(), nullptr, -1).size()));
}

struct NamedFilter {
  const char* name;
  Filter fn;
};

const NamedFilter kFilters[] = {
    {"tojson", FTojson}, {"trim", FTrim}, {"length", FLength}, {"count", FLength},
    {"default", FDefault}, {"d", FDefault}, {"items", FItems}, {"join", FJoin},
    {"selectattr", FSelectattr}, {"rejectattr", FRejectattr}, {"select", FSelectF},
    {"reject", FReject}, {"map", FMap}, {"first", FFirst}, {"last", FLast}, {"list", FList},
    {"string", FString}, {"safe", FSafe}, {"lower", FLower}, {"upper", FUpper},
    {"capitalize", FCapitalize}, {"title", FTitle}, {"replace", FReplace}, {"int", FInt},
    {"float", FFloat}, {"round", FRound}, {"abs", FAbs}, {"sort", FSort}, {"dictsort", FDictsort},
    {"unique", FUnique}, {"max", FMax}, {"min", FMin}, {"sum", FSum}, {"reverse", FReverse},
    {"indent", FIndent}, {"escape", FEscape}, {"e", FEscape}, {"forceescape", FEscape},
    {"format", FFormat}, {"attr", FAttr}, {"wordcount", FWordcount},
};

// Filters whose input must be defined (jinja2 converts or iterates it, and Undefined fails).
bool NeedsDefined(const std::string& name) {
  return name == "tojson" || name == "first" || name == "last" || name == "int" || name == "float" ||
         name == "round" || name == "abs" || name == "sort" || name == "dictsort" || name == "unique" ||
         name == "max" || name == "min" || name == "sum" || name == "reverse" ||
         name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject" || name == "map";
}

}  // namespace

absl::StatusOr<Value> Interpreter::ApplyFilter(const std::string& name, Value subject, CallArgs& args) {
  for (const auto& f : kFilters) {
    if (name != f.name) continue;
    if (subject.is_undefined() && name == "tojson") {
      return Error("TypeError", "Object of type Undefined is not JSON serializable");
    }
    (void)NeedsDefined;
    return f.fn(*this, subject, args);
  }
  return Error("TemplateRuntimeError", absl::StrCat("No filter named '", name, "' found."));
}

}  // namespace tessera::tmpl
