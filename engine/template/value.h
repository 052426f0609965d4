// Runtime values of the chat template engine, with Python's semantics for printing,
// truthiness, equality and ordering (what jinja2 templates observe).
#ifndef TESSERA_ENGINE_TEMPLATE_VALUE_H_
#define TESSERA_ENGINE_TEMPLATE_VALUE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::tmpl {

class Value;
struct CallArgs;
class Interpreter;

using List = std::vector<Value>;

// An insertion-ordered mapping with string keys (what JSON objects and template dict
// literals give).
class Dict {
 public:
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
  // Drops every entry (breaks a reference cycle through this dict).
  void Clear();
  // Keys that are not strings (a template's `{0: 'a'}`) are kept with their type.
  const Value* FindKey(const Value& key) const;
  void SetKey(const Value& key, Value value);
  Value KeyAt(size_t i) const;
  size_t size() const;
  // Entries by their key string (a non-string key appears as its encoding; see KeyAt).
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::vector<std::pair<size_t, std::shared_ptr<const Value>>> other_keys_;
  absl::flat_hash_map<std::string, size_t> index_;
};

using NativeFn = std::function<absl::StatusOr<Value>(Interpreter&, CallArgs&)>;

struct Callable {
  std::string name;
  NativeFn fn;
};

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

class Value {
 public:
  Value() = default;  // undefined
  static Value Undefined(std::string hint) {
    Value v;
    v.str_ = std::make_shared<const std::string>(std::move(hint));
    return v;
  }
  static Value None() { Value v; v.kind_ = Kind::kNone; return v; }
  static Value Bool(bool b) { Value v; v.kind_ = Kind::kBool; v.int_ = b; return v; }
  static Value Int(int64_t i) { Value v; v.kind_ = Kind::kInt; v.int_ = i; return v; }
  static Value Float(double f) { Value v; v.kind_ = Kind::kFloat; v.float_ = f; return v; }
  static Value String(std::string s) {
    Value v;
    v.kind_ = Kind::kString;
    v.str_ = std::make_shared<const std::string>(std::move(s));
    return v;
  }
  // A string marked safe (jinja2's Markup, from `|safe` or `|escape`).
  static Value Markup(std::string s) {
    Value v = String(std::move(s));
    v.flag_ = true;
    return v;
  }
  // The lazy sequence jinja2's select/reject/map filters return: iterable, always true,
  // without a length and not JSON-serialisable.
  static Value Generator(List items) {
    Value v = MakeList(std::move(items));
    v.generator_ = true;
    return v;
  }
  static Value MakeList(List items, bool tuple = false) {
    Value v;
    v.kind_ = Kind::kList;
    for (const Value& item : items) {
      v.depth_ = std::max(v.depth_, item.depth_ + 1);
      v.weight_ = AddWeight(v.weight_, item.weight_);
    }
    v.list_ = std::make_shared<const List>(std::move(items));
    v.flag_ = tuple;
    return v;
  }
  static Value MakeDict(std::shared_ptr<Dict> dict, bool mutable_namespace = false) {
    Value v;
    v.kind_ = Kind::kDict;
    if (!mutable_namespace) {
      for (const auto& e : dict->entries()) {
        v.depth_ = std::max(v.depth_, e.second.depth_ + 1);
        v.weight_ = AddWeight(v.weight_, AddWeight(1, e.second.weight_));
      }
    }
    v.dict_ = std::move(dict);
    v.flag_ = mutable_namespace;
    return v;
  }
  static Value Function(std::string name, NativeFn fn) {
    Value v;
    v.kind_ = Kind::kCallable;
    v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
    return v;
  }
  // JSON objects keep their key order when given as nlohmann::ordered_json.
  template <typename Json>
  static Value FromJson(const Json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && flag_; }
  bool is_generator() const { return kind_ == Kind::kList && generator_; }
  bool is_markup() const { return kind_ == Kind::kString && flag_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kDict && flag_; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  // How deeply lists and dicts nest inside this value (0 for scalars and namespaces).
  uint32_t depth() const { return depth_; }
  // The items a full walk of the value visits (printing, ==, tojson), counting an item
  // once per place it appears: `{% set x = [x, x] %}` doubles it. Saturates.
  uint64_t weight() const { return weight_; }
  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return *str_; }
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }
  const Callable& callable() const { return *fn_; }
  // Why a value is undefined, as jinja2 words it ("'x' is undefined").
  std::string undefined_message() const { return str_ ? *str_ : "undefined"; }

  bool Truthy() const;
  // str(value) in Python; undefined prints as "".
  std::string ToString() const;
  // repr(value) in Python.
  std::string Repr() const;
  // "dict object", "str object", "None": jinja2's object_type_repr.
  std::string TypeRepr() const;
  // Python type name: "str", "dict", "NoneType".
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool flag_ = false;
  bool generator_ = false;
  uint32_t depth_ = 0;
  uint64_t weight_ = 1;
  static uint64_t AddWeight(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> fn_;
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The keyword argument `name`, removed from kwargs, or the positional one at `pos`.
  Value Take(size_t pos, std::string_view name, bool* found = nullptr);
};

// Python's ==.
bool Equals(const Value& a, const Value& b);
// Python's <: -1, 0, 1, or an error for unorderable types.
absl::StatusOr<int> Compare(const Value& a, const Value& b);
// Python's repr of a float.
std::string FloatRepr(double d);
// json.dumps(value, ensure_ascii, indent, separators, sort_keys) as Python does it.
struct JsonOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // one level of indentation when has_indent
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  size_t max_bytes = SIZE_MAX;  // longer output fails (RESOURCE_EXHAUSTED)
};
absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options);


template <typename Json>
inline Value Value::FromJson(const Json& j) {
  switch (j.type()) {
    case nlohmann::detail::value_t::null: return Value::None();
    case nlohmann::detail::value_t::boolean: return Value::Bool(j.template get<bool>());
    case nlohmann::detail::value_t::number_integer: return Value::Int(j.template get<int64_t>());
    case nlohmann::detail::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Value::Float(static_cast<double>(u))
                                                  : Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::detail::value_t::number_float: return Value::Float(j.template get<double>());
    case nlohmann::detail::value_t::string: return Value::String(j.template get<std::string>());
    case nlohmann::detail::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e));
      return Value::MakeList(std::move(items));
    }
    case nlohmann::detail::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it) d->Set(it.key(), FromJson(it.value()));
      return Value::MakeDict(std::move(d));
    }
    default: return Value::None();
  }
}

// Defined here, where Value is complete (clang needs it for the pair's size).
inline size_t Dict::size() const { return entries_.size(); }

}  // namespace tessera::tmpl

#endif  // TESSERA_ENGINE_TEMPLATE_VALUE_H_
