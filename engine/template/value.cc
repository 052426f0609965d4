#include "engine/template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace tessera::tmpl {

const Value* Dict::Find(std::string_view key) const {
  auto it = index_.find(absl::string_view(key.data(), key.size()));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::Clear() {
  entries_.clear();
  other_keys_.clear();
  index_.clear();
}

void Dict::Set(std::string key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

namespace {
std::string KeyCode(const Value& key) {
  if (key.is_string()) return key.str();
  return "\x01" + key.Repr();
}
}  // namespace

const Value* Dict::FindKey(const Value& key) const {
  if (key.kind() == Kind::kBool) return FindKey(Value::Int(key.as_int()));
  if (key.kind() == Kind::kFloat && key.as_double() == static_cast<double>(static_cast<int64_t>(key.as_double()))) {
    return FindKey(Value::Int(static_cast<int64_t>(key.as_double())));
  }
  return Find(KeyCode(key));
}

void Dict::SetKey(const Value& key, Value value) {
  std::string code = KeyCode(key);
  if (!key.is_string() && Find(code) == nullptr) {
    other_keys_.emplace_back(entries_.size(), std::make_shared<const Value>(key));
  }
  Set(std::move(code), std::move(value));
}

Value Dict::KeyAt(size_t i) const {
  for (const auto& [pos, key] : other_keys_) {
    if (pos == i) return *key;
  }
  return Value::String(entries_[i].first);
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0.0;
    case Kind::kString: return !str_->empty();
    case Kind::kList: return generator_ || !list_->empty();
    case Kind::kDict: return flag_ || dict_->size() > 0;
    case Kind::kCallable: return true;
  }
  return false;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  // Shortest round-trip digits in scientific form, then laid out as Python's repr does.
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out.append(".").append(digits, 1, std::string::npos);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out.append("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    out.append(digits).append(static_cast<size_t>(exp) + 1 - digits.size(), '0').append(".0");
  } else {
    out.append(digits, 0, static_cast<size_t>(exp) + 1).append(".").append(digits, static_cast<size_t>(exp) + 1, std::string::npos);
  }
  return out;
}

namespace {

std::string ReprString(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return *str_;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return int_ ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return FloatRepr(float_);
    case Kind::kString: return ReprString(*str_);
    case Kind::kList: {
      if (generator_) return "<generator object>";
      std::string out = flag_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (flag_ && list_->size() == 1) out += ",";
      return out + (flag_ ? ")" : "]");
    }
    case Kind::kDict: {
      if (flag_) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        if (i) out += ", ";
        out += dict_->KeyAt(i).Repr() + ": " + dict_->entries()[i].second.Repr();
      }
      return out + "}";
    }
    case Kind::kCallable: return "<function " + fn_->name + ">";
  }
  return "";
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return generator_ ? "generator" : flag_ ? "tuple" : "list";
    case Kind::kDict: return flag_ ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "";
}

std::string Value::TypeRepr() const {
  if (kind_ == Kind::kNone) return "None";
  return TypeName() + " object";
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: {
      if (a.is_tuple() != b.is_tuple() || a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!Equals(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict() == &b.dict();
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().entries()) {
        const Value* o = b.dict().Find(k);
        if (o == nullptr || !Equals(v, *o)) return false;
      }
      return true;
    }
    case Kind::kCallable: return &a.callable() == &b.callable();
    default: return false;
  }
}

absl::StatusOr<int> Compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    size_t n = std::min(a.list().size(), b.list().size());
    for (size_t i = 0; i < n; ++i) {
      if (Equals(a.list()[i], b.list()[i])) continue;
      return Compare(a.list()[i], b.list()[i]);
    }
    return a.list().size() < b.list().size() ? -1 : (a.list().size() > b.list().size() ? 1 : 0);
  }
  return absl::InvalidArgumentError(absl::StrCat("TypeError: '<' not supported between instances of '",
                                                 a.TypeName(), "' and '", b.TypeName(), "'"));
}

Value CallArgs::Take(size_t pos, std::string_view name, bool* found) {
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    if (it->first == name) {
      Value v = std::move(it->second);
      kwargs.erase(it);
      if (found) *found = true;
      return v;
    }
  }
  if (pos < args.size()) {
    if (found) *found = true;
    return args[pos];
  }
  if (found) *found = false;
  return Value();
}

}  // namespace tessera::tmpl
