#include "engine/template/strings.h"

#include <algorithm>

#include "engine/template/utf8_util.h"

namespace tessera::tmpl {
namespace {

bool InSet(uint32_t cp, const std::vector<uint32_t>* set) {
  if (set == nullptr) return IsPySpace(cp);
  return std::find(set->begin(), set->end(), cp) != set->end();
}

std::vector<uint32_t> CodePoints(std::string_view s) {
  std::vector<uint32_t> out;
  size_t i = 0;
  while (i < s.size()) out.push_back(DecodeUtf8(s, i));
  return out;
}

// Cased letters this engine maps: ASCII, Latin-1, Greek and Cyrillic basics.
uint32_t ToLowerCp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}
uint32_t ToUpperCp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}
bool IsCased(uint32_t c) { return ToLowerCp(c) != c || ToUpperCp(c) != c; }

std::string MapCase(std::string_view s, uint32_t (*f)(uint32_t)) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    uint32_t cp = DecodeUtf8(s, i);
    uint32_t m = f(cp);
    if (m == cp) out.append(s.substr(start, i - start));
    else AppendUtf8(m, out);
  }
  return out;
}

}  // namespace

size_t PyLen(std::string_view s) {
  size_t n = 0;
  size_t i = 0;
  while (i < s.size()) {
    DecodeUtf8(s, i);
    ++n;
  }
  return n;
}

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars) set = CodePoints(*chars);
  const std::vector<uint32_t>* sp = chars ? &set : nullptr;
  auto pieces = SplitChars(s);
  size_t b = 0, e = pieces.size();
  auto cp_of = [&](size_t k) {
    size_t i = 0;
    return DecodeUtf8(pieces[k], i);
  };
  if (left) while (b < e && InSet(cp_of(b), sp)) ++b;
  if (right) while (e > b && InSet(cp_of(e - 1), sp)) --e;
  if (b == e) return "";
  size_t start = pieces[b].data() - s.data();
  size_t end = pieces[e - 1].data() + pieces[e - 1].size() - s.data();
  return std::string(s.substr(start, end - start));
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, pos);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  auto pieces = SplitChars(s);
  size_t k = 0;
  auto is_space = [&](size_t j) { size_t i = 0; return IsPySpace(DecodeUtf8(pieces[j], i)); };
  while (k < pieces.size()) {
    while (k < pieces.size() && is_space(k)) ++k;
    if (k >= pieces.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t start = pieces[k].data() - s.data();
      out.emplace_back(s.substr(start));
      return out;
    }
    std::string word;
    while (k < pieces.size() && !is_space(k)) word += pieces[k++];
    out.push_back(std::move(word));
  }
  return out;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return PySplit(s, sep, -1);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit && end >= sep->size()) {
      size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::vector<std::string> words = PySplit(s, nullptr, -1);
  if (static_cast<int64_t>(words.size()) <= maxsplit + 1) return words;
  // Keep the last maxsplit words; the rest (with its inner spacing) is the first item.
  std::string stripped = PyStrip(s, nullptr, false, true);
  std::string_view rest = stripped;
  for (int64_t i = 0; i < maxsplit; ++i) {
    size_t end = rest.size();
    size_t at = rest.find_last_of(" \t\n\r\v\f");
    std::string_view word = rest.substr(at == std::string_view::npos ? 0 : at + 1);
    out.emplace_back(word);
    rest = rest.substr(0, end - word.size());
    rest = std::string_view(rest.data(), PyStrip(rest, nullptr, false, true).size());
  }
  out.emplace_back(rest);
  std::reverse(out.begin(), out.end());
  return out;
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    auto pieces = SplitChars(s);
    int64_t done = 0;
    for (auto p : pieces) {
      if (count < 0 || done < count) { out += repl; ++done; }
      out += p;
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out.append(repl);
    pos = at + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string PyLower(std::string_view s) { return MapCase(s, ToLowerCp); }
std::string PyUpper(std::string_view s) { return MapCase(s, ToUpperCp); }

std::string PyTitle(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp = DecodeUtf8(s, i);
    uint32_t m = prev_cased ? ToLowerCp(cp) : ToUpperCp(cp);
    AppendUtf8(m, out);
    prev_cased = IsCased(cp);
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  size_t i = 0;
  bool first = true;
  while (i < s.size()) {
    uint32_t cp = DecodeUtf8(s, i);
    AppendUtf8(first ? ToUpperCp(cp) : ToLowerCp(cp), out);
    first = false;
  }
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    uint32_t cp = DecodeUtf8(s, i);
    bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
               cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) { cur.append(s.substr(start, i - start)); continue; }
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.push_back(std::move(cur));
    cur.clear();
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace tessera::tmpl
