// Python str operations on UTF-8 text, shared by string methods and filters.
#ifndef TESSERA_ENGINE_TEMPLATE_STRINGS_H_
#define TESSERA_ENGINE_TEMPLATE_STRINGS_H_

#include <string>
#include <string_view>
#include <vector>

#include "engine/template/value.h"

namespace tessera::tmpl {

// str.strip/lstrip/rstrip: whitespace when chars is null, else the code points of *chars.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
std::string PyLower(std::string_view s);
std::string PyUpper(std::string_view s);
std::string PyTitle(std::string_view s);       // str.title()
std::string PyCapitalize(std::string_view s);  // str.capitalize()
std::vector<std::string> PySplitLines(std::string_view s);
size_t PyLen(std::string_view s);  // code points

}  // namespace tessera::tmpl

#endif  // TESSERA_ENGINE_TEMPLATE_STRINGS_H_
