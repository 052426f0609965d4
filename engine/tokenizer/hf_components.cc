// The normalizers, pre-tokenizers and decoders of tokenizer.json.

#include "engine/tokenizer/hf_components.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <array>
#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {
namespace {

constexpr const char* kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteAlphabet {
  std::array<std::string, 256> to_char;
  std::array<int16_t, 324> to_byte;
  ByteAlphabet() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      AppendUtf8(cp, &to_char[b]);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet* const alphabet = new ByteAlphabet();
  return *alphabet;
}

// A regex that matches `literal` exactly.
std::string EscapeLiteral(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", u);
      out += buf;
    } else if (u < 0x80 && !std::isalnum(u)) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

// A Split or Replace pattern: {"String": s} or {"Regex": r}.
absl::StatusOr<std::shared_ptr<const Regex>> ParsePattern(const Json& spec, std::string_view where,
                                                          std::string* literal) {
  auto pattern = Member(spec, "pattern", where);
  if (!pattern.ok()) return pattern.status();
  const Json& p = **pattern;
  const std::string at = absl::StrCat(AsAbsl(where), ".pattern");
  if (!p.is_object() || p.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(at, " is not {\"String\"|\"Regex\": ...}"));
  }
  std::string regex_text;
  if (const Json* s = OptionalMember(p, "String"); s != nullptr && s->is_string()) {
    if (literal != nullptr) *literal = s->get<std::string>();
    regex_text = EscapeLiteral(s->get<std::string>());
  } else if (const Json* r = OptionalMember(p, "Regex"); r != nullptr && r->is_string()) {
    regex_text = r->get<std::string>();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(at, " is not {\"String\"|\"Regex\": string}"));
  }
  if (regex_text.empty()) return absl::InvalidArgumentError(absl::StrCat(at, " is empty"));
  auto regex = Regex::Compile(regex_text);
  if (!regex.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(at, ": ", regex.status().message()));
  }
  return std::shared_ptr<const Regex>(*std::move(regex));
}

std::string IcuNormalize(std::string_view text, const icu::Normalizer2* normalizer) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii || normalizer == nullptr) return std::string(text);
  UErrorCode error = U_ZERO_ERROR;
  const icu::UnicodeString in =
      icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  const icu::UnicodeString out = normalizer->normalize(in, error);
  if (U_FAILURE(error)) return std::string(text);
  std::string result;
  out.toUTF8String(result);
  return result;
}

void ReplaceAll(std::string_view text, std::string_view from, std::string_view to,
                std::string* out) {
  size_t pos = 0;
  while (true) {
    const size_t m = text.find(from, pos);
    if (m == std::string_view::npos) break;
    out->append(text.substr(pos, m - pos));
    out->append(to);
    pos = m + from.size();
  }
  out->append(text.substr(pos));
}

absl::StatusOr<const Json*> Steps(const Json& spec, std::string_view key, std::string_view where) {
  auto list = Member(spec, key, where);
  if (!list.ok()) return list.status();
  if (!(*list)->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), ".", AsAbsl(key), " is not an array"));
  }
  return *list;
}

}  // namespace

absl::StatusOr<MetaspaceSpec> ParseMetaspace(const Json& spec, std::string_view where) {
  MetaspaceSpec m;
  auto replacement = StringMember(spec, "replacement", where);
  if (!replacement.ok()) return replacement.status();
  const Utf8Step one = DecodeUtf8(*replacement);
  if (one.status != Utf8Status::kValid || one.len != replacement->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), ".replacement is not one character"));
  }
  m.replacement = *replacement;
  const Json* scheme = OptionalMember(spec, "prepend_scheme");
  if (scheme != nullptr) {
    const std::pair<const char*, MetaspacePrepend> kSchemes[] = {
        {"always", MetaspacePrepend::kAlways},
        {"first", MetaspacePrepend::kFirst},
        {"never", MetaspacePrepend::kNever}};
    bool known = false;
    for (const auto& [name, value] : kSchemes) {
      if (scheme->is_string() && scheme->get<std::string>() == name) {
        m.prepend = value;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          AsAbsl(where), ".prepend_scheme is not \"always\", \"first\" or \"never\""));
    }
  }
  // Files written before prepend_scheme existed say add_prefix_space.
  auto prefix = BoolMember(spec, "add_prefix_space", true, where);
  if (!prefix.ok()) return prefix.status();
  if (!*prefix) {
    if (scheme != nullptr && m.prepend != MetaspacePrepend::kNever) {
      return absl::InvalidArgumentError(absl::StrCat(
          AsAbsl(where), ": add_prefix_space false contradicts prepend_scheme"));
    }
    m.prepend = MetaspacePrepend::kNever;
  }
  auto split = BoolMember(spec, "split", true, where);
  if (!split.ok()) return split.status();
  m.split = *split;
  return m;
}

const std::string& ByteLevelChar(uint8_t byte) { return Alphabet().to_char[byte]; }

int ByteLevelByte(char32_t cp) { return cp < 324 ? Alphabet().to_byte[cp] : -1; }

// --- normalizer ---

absl::StatusOr<HfNormalizer> HfNormalizer::Parse(const Json* spec) {
  HfNormalizer n;
  if (spec == nullptr || spec->is_null()) return n;
  if (absl::Status s = ParseOne(*spec, "normalizer", &n.steps_); !s.ok()) return s;
  return n;
}

absl::Status HfNormalizer::ParseOne(const Json& spec, std::string_view where,
                                    std::vector<Step>* steps) {
  auto type = TypeOf(spec, where);
  if (!type.ok()) return type.status();
  const std::string at = absl::StrCat(AsAbsl(where), "(", *type, ")");
  if (*type == "Sequence") {
    auto list = Steps(spec, "normalizers", at);
    if (!list.ok()) return list.status();
    for (const Json& item : **list) {
      if (absl::Status s = ParseOne(item, at, steps); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (*type == "NFC") return steps->push_back({Kind::kNfc, "", nullptr, ""}), absl::OkStatus();
  if (*type == "NFD") return steps->push_back({Kind::kNfd, "", nullptr, ""}), absl::OkStatus();
  if (*type == "NFKC") return steps->push_back({Kind::kNfkc, "", nullptr, ""}), absl::OkStatus();
  if (*type == "NFKD") return steps->push_back({Kind::kNfkd, "", nullptr, ""}), absl::OkStatus();
  if (*type == "Prepend") {
    auto prepend = StringMember(spec, "prepend", at);
    if (!prepend.ok()) return prepend.status();
    steps->push_back({Kind::kPrepend, "", nullptr, *prepend});
    return absl::OkStatus();
  }
  if (*type == "Replace") {
    std::string literal;
    auto regex = ParsePattern(spec, at, &literal);
    if (!regex.ok()) return regex.status();
    auto content = StringMember(spec, "content", at);
    if (!content.ok()) return content.status();
    // A String pattern is replaced by plain search; a Regex one by the regex.
    const bool is_literal = !literal.empty();
    steps->push_back({Kind::kReplace, literal, is_literal ? nullptr : *regex, *content});
    return absl::OkStatus();
  }
  return Unsupported(absl::StrCat("normalizer \"", *type, "\""), where);
}

std::string HfNormalizer::Apply(std::string_view text) const {
  std::string cur(text);
  UErrorCode error = U_ZERO_ERROR;
  for (const Step& step : steps_) {
    std::string next;
    switch (step.kind) {
      case Kind::kNfc:
        next = IcuNormalize(cur, icu::Normalizer2::getNFCInstance(error));
        break;
      case Kind::kNfd:
        next = IcuNormalize(cur, icu::Normalizer2::getNFDInstance(error));
        break;
      case Kind::kNfkc:
        next = IcuNormalize(cur, icu::Normalizer2::getNFKCInstance(error));
        break;
      case Kind::kNfkd:
        next = IcuNormalize(cur, icu::Normalizer2::getNFKDInstance(error));
        break;
      case Kind::kPrepend:
        next = cur.empty() ? cur : step.content + cur;
        break;
      case Kind::kReplace:
        if (step.regex == nullptr) {
          ReplaceAll(cur, step.pattern, step.content, &next);
        } else if (!IsValidUtf8(cur)) {
          next = cur;  // a regex matches characters: ill-formed text is left as it is
        } else {
          size_t pos = 0, b = 0, e = 0;
          while (pos < cur.size() && step.regex->Search(cur, pos, &b, &e) && e > b) {
            next.append(cur, pos, b - pos);
            next.append(step.content);
            pos = e;
          }
          next.append(cur, pos, std::string::npos);
        }
        break;
    }
    cur = std::move(next);
  }
  return cur;
}

// --- pre-tokenizer ---

absl::StatusOr<HfPreTokenizer> HfPreTokenizer::Parse(const Json* spec) {
  HfPreTokenizer p;
  if (spec == nullptr || spec->is_null()) return p;
  if (absl::Status s = ParseOne(*spec, "pre_tokenizer", &p); !s.ok()) return s;
  return p;
}

absl::Status HfPreTokenizer::ParseOne(const Json& spec, std::string_view where,
                                      HfPreTokenizer* out) {
  auto type = TypeOf(spec, where);
  if (!type.ok()) return type.status();
  const std::string at = absl::StrCat(AsAbsl(where), "(", *type, ")");
  if (out->byte_level_) {
    return Unsupported(absl::StrCat("pre-tokenizer \"", *type, "\" after ByteLevel"), where);
  }
  if (*type == "Sequence") {
    auto list = Steps(spec, "pretokenizers", at);
    if (!list.ok()) return list.status();
    for (const Json& item : **list) {
      if (absl::Status s = ParseOne(item, at, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (*type == "Split") {
    Step step;
    auto regex = ParsePattern(spec, at, nullptr);
    if (!regex.ok()) return regex.status();
    step.regex = *regex;
    auto behavior = StringMember(spec, "behavior", at);
    if (!behavior.ok()) return behavior.status();
    const std::pair<const char*, SplitBehavior> kBehaviors[] = {
        {"Isolated", SplitBehavior::kIsolated},
        {"Removed", SplitBehavior::kRemoved},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    bool known = false;
    for (const auto& [name, value] : kBehaviors) {
      if (*behavior == name) step.behavior = value, known = true;
    }
    if (!known) return Unsupported(absl::StrCat("Split behavior \"", *behavior, "\""), at);
    auto invert = BoolMember(spec, "invert", false, at);
    if (!invert.ok()) return invert.status();
    step.invert = *invert;
    out->steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (*type == "Metaspace") {
    auto m = ParseMetaspace(spec, at);
    if (!m.ok()) return m.status();
    Step step;
    step.metaspace = m->replacement;
    step.prepend = m->prepend;
    if (m->split) {
      // Each replacement starts a word (MergedWithNext).
      auto regex = Regex::Compile(EscapeLiteral(m->replacement));
      if (!regex.ok()) return regex.status();
      step.regex = std::shared_ptr<const Regex>(*std::move(regex));
      step.behavior = SplitBehavior::kMergedWithNext;
    }
    out->steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (*type == "ByteLevel") {
    auto prefix = BoolMember(spec, "add_prefix_space", true, at);
    auto use_regex = BoolMember(spec, "use_regex", true, at);
    if (!prefix.ok()) return prefix.status();
    if (!use_regex.ok()) return use_regex.status();
    Step step;
    step.add_prefix_space = *prefix;
    if (*use_regex) {
      auto regex = Regex::Compile(kByteLevelPattern);
      if (!regex.ok()) return regex.status();
      step.regex = std::shared_ptr<const Regex>(*std::move(regex));
    }
    out->steps_.push_back(std::move(step));
    out->byte_level_ = true;
    return absl::OkStatus();
  }
  return Unsupported(absl::StrCat("pre-tokenizer \"", *type, "\""), where);
}

void HfPreTokenizer::Split(std::string_view text, bool at_start,
                           std::vector<std::string_view>* words,
                           std::deque<std::string>* storage) const {
  std::vector<std::string_view> cur = {text};
  for (const Step& step : steps_) {
    if (!step.metaspace.empty()) MetaspaceWords(step, text, at_start, &cur, storage);
    if (step.add_prefix_space) {
      for (std::string_view& w : cur) {
        if (!w.empty() && w[0] != ' ') {
          storage->emplace_back(1, ' ');
          storage->back().append(w);
          w = storage->back();
        }
      }
    }
    if (step.regex != nullptr) SplitPieces(*step.regex, step.behavior, step.invert, &cur);
  }
  for (std::string_view w : cur) {
    if (!w.empty()) words->push_back(w);
  }
}

// Spaces to the replacement, which is then put in front of a word that
// does not start with it: of every word, or ("first") of the word at the
// start of the input only (the crate's test: the word's original offset is 0).
void HfPreTokenizer::MetaspaceWords(const Step& step, std::string_view text, bool at_start,
                                    std::vector<std::string_view>* words,
                                    std::deque<std::string>* storage) {
  for (std::string_view& w : *words) {
    if (w.empty()) continue;
    std::string out;
    const bool first = at_start && w.data() == text.data();
    const bool prepend = step.prepend == MetaspacePrepend::kAlways ||
                         (step.prepend == MetaspacePrepend::kFirst && first);
    // After the replacement, w starts with it when it starts with a space.
    const bool starts = w[0] == ' ' || w.substr(0, step.metaspace.size()) == step.metaspace;
    if (prepend && !starts) out = step.metaspace;
    ReplaceAll(w, " ", step.metaspace, &out);
    if (out == w) continue;
    storage->push_back(std::move(out));
    w = storage->back();
  }
}

// --- decoder ---

absl::StatusOr<HfDecoder> HfDecoder::Parse(const Json* spec) {
  HfDecoder d;
  if (spec == nullptr || spec->is_null()) return d;
  bool fused = false;
  if (absl::Status s = ParseOne(*spec, "decoder", &fused, &d); !s.ok()) return s;
  return d;
}

absl::Status HfDecoder::ParseOne(const Json& spec, std::string_view where, bool* fused,
                                 HfDecoder* out) {
  auto type = TypeOf(spec, where);
  if (!type.ok()) return type.status();
  const std::string at = absl::StrCat(AsAbsl(where), "(", *type, ")");
  if (out->after_strip_) {
    return Unsupported(absl::StrCat("decoder \"", *type, "\" after Strip"), where);
  }
  if (*type == "Sequence") {
    auto list = Steps(spec, "decoders", at);
    if (!list.ok()) return list.status();
    for (const Json& item : **list) {
      if (absl::Status s = ParseOne(item, at, fused, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (*type == "ByteLevel") {
    return out->steps_.push_back({Kind::kByteLevel, "", ""}), absl::OkStatus();
  }
  if (*type == "ByteFallback") {
    return out->steps_.push_back({Kind::kByteFallback, "", ""}), absl::OkStatus();
  }
  if (*type == "Fuse") return *fused = true, absl::OkStatus();
  if (*type == "Replace") {
    std::string literal;
    auto regex = ParsePattern(spec, at, &literal);
    if (!regex.ok()) return regex.status();
    if (literal.empty()) return Unsupported("Replace decoder with a Regex pattern", at);
    auto content = StringMember(spec, "content", at);
    if (!content.ok()) return content.status();
    out->steps_.push_back({Kind::kReplace, literal, *content});
    return absl::OkStatus();
  }
  if (*type == "Strip") {
    auto content = StringMember(spec, "content", at);
    if (!content.ok()) return content.status();
    const Json* start = OptionalMember(spec, "start");
    const Json* stop = OptionalMember(spec, "stop");
    if (start == nullptr || stop == nullptr || !start->is_number_unsigned() ||
        !stop->is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": start and stop must be counts"));
    }
    // Only the form Llama-style tokenizers use: after Fuse, one leading space.
    if (!*fused || *content != " " || start->get<uint64_t>() != 1 || stop->get<uint64_t>() != 0) {
      return Unsupported("Strip decoder other than Fuse + Strip(\" \", 1, 0)", at);
    }
    out->strip_leading_space_ = true;
    out->after_strip_ = true;
    return absl::OkStatus();
  }
  if (*type == "Metaspace") {
    // The replacement decodes to a space, and unless prepend_scheme is
    // "never" the text loses one leading space, as @huggingface/tokenizers
    // decodes. The Rust crate drops every replacement of the first token,
    // which differs where that token holds more than one (such as "▁▁").
    auto m = ParseMetaspace(spec, at);
    if (!m.ok()) return m.status();
    out->steps_.push_back({Kind::kReplace, m->replacement, " "});
    if (m->prepend != MetaspacePrepend::kNever) out->strip_leading_space_ = true;
    return absl::OkStatus();
  }
  return Unsupported(absl::StrCat("decoder \"", *type, "\""), where);
}

std::string HfDecoder::TokenBytes(std::string_view token) const {
  std::string cur(token);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kByteLevel: {
        std::string bytes;
        for (size_t pos = 0; pos < cur.size();) {
          const Utf8Step u = DecodeUtf8(std::string_view(cur).substr(pos));
          const size_t len = u.status == Utf8Status::kValid ? u.len : 1;
          const int b = u.status == Utf8Status::kValid ? ByteLevelByte(u.codepoint) : -1;
          if (b >= 0) {
            bytes.push_back(static_cast<char>(b));
          } else {
            bytes.append(cur, pos, len);
          }
          pos += len;
        }
        cur = std::move(bytes);
        break;
      }
      case Kind::kByteFallback: {
        unsigned value = 0;
        if (cur.size() == 6 && cur.compare(0, 3, "<0x") == 0 && cur[5] == '>' &&
            std::sscanf(cur.c_str() + 3, "%2X", &value) == 1 && std::isxdigit(cur[3]) &&
            std::isxdigit(cur[4])) {
          cur = std::string(1, static_cast<char>(value));
        }
        break;
      }
      case Kind::kReplace: {
        std::string next;
        ReplaceAll(cur, step.pattern, step.content, &next);
        cur = std::move(next);
        break;
      }
      case Kind::kStrip:
        break;
    }
  }
  return cur;
}

}  // namespace tessera::tokenizer_internal
