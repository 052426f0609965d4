// Splits a template into tokens the way jinja2's lexer does with trim_blocks and
// lstrip_blocks on (whitespace control, comments and raw blocks resolved here).
#ifndef TESSERA_ENGINE_TEMPLATE_LEXER_H_
#define TESSERA_ENGINE_TEMPLATE_LEXER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::tmpl {

enum class Tok { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat,
                 kOp, kEof };

struct Token {
  Tok type;
  std::string value;  // text of data, names, operators; decoded strings; number spelling
  int line;
};

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace tessera::tmpl

#endif  // TESSERA_ENGINE_TEMPLATE_LEXER_H_
