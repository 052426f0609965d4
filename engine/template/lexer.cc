#include "engine/template/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/template/utf8_util.h"

namespace tessera::tmpl {
namespace {

absl::Status SyntaxError(int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("template syntax error at line ", line, ": ", what));
}

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Python's str.rstrip() (Unicode whitespace).
std::string_view RStripPy(std::string_view s) {
  while (!s.empty()) {
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    uint32_t cp = DecodeUtf8(s, i);
    if (!IsPySpace(cp)) break;
    s.remove_suffix(s.size() - start);
  }
  return s;
}

bool AllPySpace(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  while (i < s.size()) {
    if (!IsPySpace(DecodeUtf8(s, i))) return false;
  }
  return true;
}

// Decodes a string literal body as Python's "unicode-escape" codec does.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 >= s.size()) {
      out += c;
      continue;
    }
    char n = s[++i];
    auto hex = [&](int digits) -> bool {
      uint32_t cp = 0;
      for (int k = 1; k <= digits; ++k) {
        if (i + k >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + k]))) return false;
        char h = s[i + k];
        cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      if (cp > 0x10FFFF) return false;
      AppendUtf8(cp, out);
      i += digits;
      return true;
    };
    switch (n) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\n': break;
      case 'x': if (!hex(2)) { out += "\\x"; } break;
      case 'u': if (!hex(4)) { out += "\\u"; } break;
      case 'U': if (!hex(8)) { out += "\\U"; } break;
      default:
        if (n >= '0' && n <= '7') {
          uint32_t cp = n - '0';
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) {
            cp = cp * 8 + (s[++i] - '0');
          }
          AppendUtf8(cp, out);
        } else {
          out += '\\';
          out += n;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}
  absl::StatusOr<std::vector<Token>> Run();

 private:
  absl::Status Root();
  absl::Status Inside(bool block);
  absl::Status Comment();
  absl::Status Raw();
  void Data(std::string_view text) {
    if (!text.empty()) out_.push_back({Tok::kData, std::string(text), line_});
    line_ += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }
  // After a closing tag: `-` eats all whitespace, `+` nothing, else one newline (trim_blocks).
  void AfterEnd(bool minus, bool plus, bool trim) {
    if (minus) {
      while (pos_ < src_.size() && IsWs(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
    } else if (!plus && trim && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

absl::StatusOr<std::vector<Token>> Lexer::Run() {
  // Newlines normalised to \n; one trailing newline dropped (keep_trailing_newline=False).
  std::string norm;
  for (size_t i = 0; i < src_.size(); ++i) {
    if (src_[i] == '\r') {
      norm += '\n';
      if (i + 1 < src_.size() && src_[i + 1] == '\n') ++i;
    } else {
      norm += src_[i];
    }
  }
  if (!norm.empty() && norm.back() == '\n') norm.pop_back();
  src_ = std::move(norm);
  absl::Status s = Root();
  if (!s.ok()) return s;
  out_.push_back({Tok::kEof, "", line_});
  return std::move(out_);
}

bool MatchesRawBegin(std::string_view rest, size_t* len, bool* minus_end) {
  // {%[-+]?\s*raw\s*(-%}|%})
  size_t i = 2;
  if (i < rest.size() && (rest[i] == '-' || rest[i] == '+')) ++i;
  while (i < rest.size() && IsWs(rest[i])) ++i;
  if (rest.substr(i, 3) != "raw") return false;
  i += 3;
  while (i < rest.size() && IsWs(rest[i])) ++i;
  *minus_end = false;
  if (rest.substr(i, 3) == "-%}") {
    *minus_end = true;
    i += 3;
  } else if (rest.substr(i, 2) == "%}") {
    i += 2;
  } else {
    return false;
  }
  *len = i;
  return true;
}

absl::Status Lexer::Root() {
  while (pos_ < src_.size()) {
    size_t next = pos_;
    while (true) {
      next = src_.find('{', next);
      if (next == std::string::npos || next + 1 >= src_.size()) break;
      char c = src_[next + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++next;
    }
    if (next == std::string::npos || next + 1 >= src_.size()) {
      Data(std::string_view(src_).substr(pos_));
      pos_ = src_.size();
      break;
    }
    char kind = src_[next + 1];
    char sign = next + 2 < src_.size() ? src_[next + 2] : 0;
    std::string_view text = std::string_view(src_).substr(pos_, next - pos_);
    if (sign == '-') {
      std::string_view stripped = RStripPy(text);
      int dropped = static_cast<int>(std::count(text.begin() + stripped.size(), text.end(), '\n'));
      Data(stripped);
      line_ += dropped;
    } else {
      if (sign != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting_) && AllPySpace(text.substr(l_pos))) text = text.substr(0, l_pos);
      }
      Data(text);
      line_ += 0;
    }
    pos_ = next;
    size_t raw_len = 0;
    bool raw_minus = false;
    absl::Status s;
    if (kind == '%' && MatchesRawBegin(std::string_view(src_).substr(pos_), &raw_len, &raw_minus)) {
      pos_ += raw_len;
      if (raw_minus) AfterEnd(true, false, false);
      s = Raw();
    } else if (kind == '#') {
      pos_ += (sign == '-' || sign == '+') ? 3 : 2;
      s = Comment();
    } else {
      int begin_line = line_;
      out_.push_back({kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "", begin_line});
      pos_ += (sign == '-' || sign == '+') ? 3 : 2;
      s = Inside(kind == '%');
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Lexer::Comment() {
  size_t end = src_.find("#}", pos_);
  if (end == std::string::npos) return SyntaxError(line_, "Missing end of comment tag");
  std::string_view body = std::string_view(src_).substr(pos_, end - pos_);
  bool minus = !body.empty() && body.back() == '-';
  bool plus = !body.empty() && body.back() == '+';
  line_ += static_cast<int>(std::count(body.begin(), body.end(), '\n'));
  pos_ = end + 2;
  AfterEnd(minus, plus, true);
  return absl::OkStatus();
}

absl::Status Lexer::Raw() {
  // Everything up to {%[-+]?\s*endraw\s*[-+]?%} is data.
  size_t search = pos_;
  while (true) {
    size_t at = src_.find("{%", search);
    if (at == std::string::npos) return SyntaxError(line_, "Missing end of raw directive");
    size_t i = at + 2;
    char sign = i < src_.size() ? src_[i] : 0;
    if (sign == '-' || sign == '+') ++i;
    while (i < src_.size() && IsWs(src_[i])) ++i;
    if (src_.compare(i, 6, "endraw") != 0) {
      search = at + 2;
      continue;
    }
    i += 6;
    while (i < src_.size() && IsWs(src_[i])) ++i;
    bool minus = false, plus = false;
    if (src_.compare(i, 3, "-%}") == 0) { minus = true; i += 3; }
    else if (src_.compare(i, 3, "+%}") == 0) { plus = true; i += 3; }
    else if (src_.compare(i, 2, "%}") == 0) { i += 2; }
    else { search = at + 2; continue; }
    std::string_view text = std::string_view(src_).substr(pos_, at - pos_);
    if (sign == '-') {
      std::string_view stripped = RStripPy(text);
      int dropped = static_cast<int>(std::count(text.begin() + stripped.size(), text.end(), '\n'));
      Data(stripped);
      line_ += dropped;
    } else {
      if (sign != '+') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string_view::npos ? 0 : l_pos + 1;
        if (l_pos > 0 && AllPySpace(text.substr(l_pos))) text = text.substr(0, l_pos);
      }
      Data(text);
    }
    line_ += static_cast<int>(std::count(src_.begin() + at, src_.begin() + i, '\n'));
    pos_ = i;
    AfterEnd(minus, plus, true);
    return absl::OkStatus();
  }
}

absl::Status Lexer::Inside(bool block) {
  std::vector<char> balance;
  const char* ops3[] = {"**", "//", "==", "!=", ">=", "<="};
  while (true) {
    while (pos_ < src_.size() && IsWs(src_[pos_])) {
      if (src_[pos_] == '\n') ++line_;
      ++pos_;
    }
    if (pos_ >= src_.size()) return SyntaxError(line_, block ? "unexpected end of template, expected end of statement block ('%}')" : "unexpected end of template, expected end of print statement ('}}')");
    std::string_view rest = std::string_view(src_).substr(pos_);
    if (balance.empty()) {
      const char* close = block ? "%}" : "}}";
      bool minus = rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close;
      bool plus = block && rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == close;
      if (minus || plus || rest.substr(0, 2) == close) {
        out_.push_back({block ? Tok::kBlockEnd : Tok::kVarEnd, "", line_});
        pos_ += (minus || plus) ? 3 : 2;
        AfterEnd(minus, plus, block);
        return absl::OkStatus();
      }
    }
    char c = rest[0];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t i = 0;
      bool is_float = false;
      while (i < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[i])) || rest[i] == '_')) ++i;
      bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
      if (!after_dot && i + 1 < rest.size() && rest[i] == '.' && std::isdigit(static_cast<unsigned char>(rest[i + 1]))) {
        is_float = true;
        ++i;
        while (i < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[i])) || rest[i] == '_')) ++i;
      }
      if (!after_dot && i < rest.size() && (rest[i] == 'e' || rest[i] == 'E')) {
        size_t j = i + 1;
        if (j < rest.size() && (rest[j] == '+' || rest[j] == '-')) ++j;
        if (j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j]))) {
          is_float = true;
          i = j;
          while (i < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[i])) || rest[i] == '_')) ++i;
        }
      }
      std::string num;
      for (char d : rest.substr(0, i)) if (d != '_') num += d;
      out_.push_back({is_float ? Tok::kFloat : Tok::kInt, num, line_});
      pos_ += i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t i = 1;
      while (i < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[i])) || rest[i] == '_')) ++i;
      out_.push_back({Tok::kName, std::string(rest.substr(0, i)), line_});
      pos_ += i;
      continue;
    }
    if (c == '\'' || c == '"') {
      size_t i = 1;
      while (i < rest.size() && rest[i] != c) i += rest[i] == '\\' ? 2 : 1;
      if (i >= rest.size()) return SyntaxError(line_, "unexpected char '" + std::string(1, c) + "'");
      std::string body(rest.substr(1, i - 1));
      out_.push_back({Tok::kString, Unescape(body), line_});
      line_ += static_cast<int>(std::count(body.begin(), body.end(), '\n'));
      pos_ += i + 1;
      continue;
    }
    std::string op;
    for (const char* o : ops3) {
      if (rest.substr(0, 2) == o) op = o;
    }
    if (op.empty()) {
      if (std::strchr("+-/*%~[](){}=.:|,;<>!", c) == nullptr || c == '!') {
        return SyntaxError(line_, absl::StrCat("unexpected char '", std::string(1, c), "'"));
      }
      op = std::string(1, c);
    }
    if (op == "(" || op == "[" || op == "{") {
      balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
    } else if (op == ")" || op == "]" || op == "}") {
      if (balance.empty()) return SyntaxError(line_, "unexpected '" + op + "'");
      if (balance.back() != op[0]) {
        return SyntaxError(line_, absl::StrCat("unexpected '", op, "', expected '", std::string(1, balance.back()), "'"));
      }
      balance.pop_back();
    }
    out_.push_back({Tok::kOp, op, line_});
    pos_ += op.size();
  }
}

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(std::string(source)).Run();
}

}  // namespace tessera::tmpl
