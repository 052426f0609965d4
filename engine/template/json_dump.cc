// json.dumps as Python's json module writes it (transformers' `tojson` filter).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "engine/template/utf8_util.h"
#include "engine/template/value.h"

namespace tessera::tmpl {
namespace {

void AppendEscaped(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    uint32_t cp = DecodeUtf8(s, i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    }
    out += buf;
  }
  out += '"';
}

absl::Status Dump(const Value& v, const JsonOptions& o, int level, std::string& out) {
  if (level > 512) return absl::InvalidArgumentError("ValueError: nesting too deep for tojson");
  if (out.size() > o.max_bytes) return absl::ResourceExhaustedError("template output exceeded its size limit");
  auto newline = [&](int l) {
    out += '\n';
    for (int i = 0; i < l && out.size() <= o.max_bytes; ++i) out += o.indent;
  };
  switch (v.kind()) {
    case Kind::kNone: out += "null"; return absl::OkStatus();
    case Kind::kBool: out += v.as_bool() ? "true" : "false"; return absl::OkStatus();
    case Kind::kInt: out += std::to_string(v.as_int()); return absl::OkStatus();
    case Kind::kFloat: {
      double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
      else out += FloatRepr(d);
      return absl::OkStatus();
    }
    case Kind::kString: AppendEscaped(v.str(), o.ensure_ascii, out); return absl::OkStatus();
    case Kind::kList: {
      if (v.is_generator()) break;
      if (v.list().empty()) { out += "[]"; return absl::OkStatus(); }
      out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += o.item_sep;
        if (o.has_indent) newline(level + 1);
        absl::Status s = Dump(v.list()[i], o, level + 1, out);
        if (!s.ok()) return s;
      }
      if (o.has_indent) newline(level);
      out += ']';
      return absl::OkStatus();
    }
    case Kind::kDict: {
      if (v.is_namespace()) break;
      if (v.dict().size() == 0) { out += "{}"; return absl::OkStatus(); }
      // json.dumps writes int, float, bool and None keys as strings.
      std::vector<std::pair<std::string, const Value*>> keyed;
      for (size_t i = 0; i < v.dict().size(); ++i) {
        Value k = v.dict().KeyAt(i);
        std::string ks = k.is_string() ? k.str() : k.is_none() ? "null" : k.kind() == Kind::kBool ? (k.as_bool() ? "true" : "false") : k.Repr();
        keyed.emplace_back(std::move(ks), &v.dict().entries()[i].second);
      }
      std::vector<const std::pair<std::string, const Value*>*> items;
      for (const auto& e : keyed) items.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_sep;
        if (o.has_indent) newline(level + 1);
        AppendEscaped(items[i]->first, o.ensure_ascii, out);
        out += o.key_sep;
        absl::Status s = Dump(*items[i]->second, o, level + 1, out);
        if (!s.ok()) return s;
      }
      if (o.has_indent) newline(level);
      out += '}';
      return absl::OkStatus();
    }
    default: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("TypeError: Object of type ", v.TypeName(), " is not JSON serializable"));
}

}  // namespace

absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  absl::Status s = Dump(v, options, 0, out);
  if (!s.ok()) return s;
  return out;
}

}  // namespace tessera::tmpl
