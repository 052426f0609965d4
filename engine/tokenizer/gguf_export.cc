#include "engine/tokenizer/gguf_export.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/hf_components.h"
#include "engine/tokenizer/hf_json.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace tessera {
namespace {

using tokenizer_internal::AsAbsl;
using tokenizer_internal::IsBytePiece;
using tokenizer_internal::Json;
using tokenizer_internal::TokenType;

// llama.cpp's tokenizer.ggml.pre names, most common first; qwen2 before
// llama-bpe, whose whole-word matches (ignore_merges) a Qwen vocabulary
// agrees with on most text but not all.
constexpr std::string_view kPreCandidates[] = {
    "qwen2",        "llama-bpe",      "gpt-2",  "smollm", "tekken",
    "deepseek-v3",  "deepseek-llm",   "deepseek-coder",   "falcon", "mpt", "default"};

// Text that tells the pre-tokenizers apart: contractions in both cases,
// digit runs of every length, scripts without spaces, emoji, whitespace
// runs and newlines, code and punctuation runs.
constexpr std::string_view kCheckText =
    "Hello World! I'm here, you're THERE, we'Ve, they'LL, it's, I'D, don't\n"
    "1 12 123 1234 12345 123456 3.14159 1,000,000 v2.0.1-rc3\n"
    "\t  tabs\t\tand   spaces    \n\n\n  newline runs \r\n windows\r\n"
    "Ünïcödé façade naïve — “quotes” ‘single’ … «guillemets»\n"
    "日本語のテキスト、中文文本。한국어 텍스트 Русский текст العربية हिन्दी ไทย\n"
    "emoji 🦙🚀 👩‍💻 👍🏽 ❤️\n"
    "def f(x):\n    return x**2 + 1  # comment\n"
    "if (a<=b && c!=d) { return [1,2,3]; } // ===> $$$ ^^^ ~~~ |||\n"
    "   leading and trailing spaces   \n"
    "The quick brown fox jumps over the lazy dog. Internationalization, "
    "counterrevolutionaries and antidisestablishmentarianism are long words; "
    "so is Pneumonoultramicroscopicsilicovolcanoconiosis.";

absl::StatusOr<Json> ParseObject(std::string_view text, std::string_view name) {
  Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(AsAbsl(name), " is not a JSON object"));
  }
  return root;
}

// The "type" string of a component object, or "".
std::string TypeName(const Json& object) {
  return tokenizer_internal::TypeOf(object, "").value_or("");
}

bool HasByteLevel(const Json* pre) {
  if (pre == nullptr || !pre->is_object()) return false;
  const std::string type = TypeName(*pre);
  if (type == "ByteLevel") return true;
  if (type != "Sequence" || !pre->contains("pretokenizers")) return false;
  const Json& list = (*pre)["pretokenizers"];
  return list.is_array() && std::any_of(list.begin(), list.end(),
                                        [](const Json& p) { return HasByteLevel(&p); });
}

// tokens and token_types by id, from model.vocab and added_tokens.
absl::Status ReadTokens(const Json& root, GgufTokenizerKeys& keys) {
  const Json* model = tokenizer_internal::OptionalMember(root, "model");
  const Json* vocab_member =
      model != nullptr && model->is_object() ? tokenizer_internal::OptionalMember(*model, "vocab")
                                             : nullptr;
  if (vocab_member == nullptr || !vocab_member->is_object()) {
    return absl::InvalidArgumentError("model.vocab is not an object");
  }
  const Json& vocab = *vocab_member;
  std::vector<std::pair<int64_t, std::string>> entries;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.vocab[\"", it.key(), "\"] is not an id"));
    }
    entries.emplace_back(it.value().get<int64_t>(), it.key());
  }
  const Json* added = tokenizer_internal::OptionalMember(root, "added_tokens");
  std::vector<std::tuple<int64_t, std::string, bool>> extra;
  if (added != nullptr && added->is_array()) {
    for (const Json& a : *added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string()) {
        return absl::InvalidArgumentError("added_tokens: an entry lacks its id or content");
      }
      const bool special = a.contains("special") && a["special"].is_boolean() &&
                           a["special"].get<bool>();
      extra.emplace_back(a["id"].get<int64_t>(), a["content"].get<std::string>(), special);
    }
  }
  int64_t size = 0;
  for (const auto& [id, _] : entries) size = std::max(size, id + 1);
  for (const auto& [id, _, __] : extra) size = std::max(size, id + 1);
  if (size <= 0 || size > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary of ", size, " ids"));
  }
  keys.tokens.assign(size, "");
  keys.token_types.assign(size, static_cast<int32_t>(TokenType::kNormal));
  for (const auto& [id, text] : entries) {
    if (id < 0) return absl::InvalidArgumentError("model.vocab holds a negative id");
    keys.tokens[id] = text;
  }
  for (const auto& [id, text, special] : extra) {
    if (id < 0) return absl::InvalidArgumentError("added_tokens holds a negative id");
    keys.tokens[id] = text;
    keys.token_types[id] =
        static_cast<int32_t>(special ? TokenType::kControl : TokenType::kUserDefined);
  }
  for (int64_t id = 0; id < size; ++id) {
    if (!keys.tokens[id].empty()) continue;
    keys.tokens[id] = absl::StrCat("[PAD", id, "]");
    keys.token_types[id] = static_cast<int32_t>(TokenType::kUnused);
  }
  return absl::OkStatus();
}

// model.merges as "left right" strings, by rank.
absl::StatusOr<std::vector<std::string>> ReadMerges(const Json& root) {
  std::vector<std::string> out;
  const Json* model = tokenizer_internal::OptionalMember(root, "model");
  const Json* merges =
      model != nullptr ? tokenizer_internal::OptionalMember(*model, "merges") : nullptr;
  if (merges == nullptr) return out;
  if (!merges->is_array()) return absl::InvalidArgumentError("model.merges is not an array");
  for (const Json& m : *merges) {
    if (m.is_string()) {
      out.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.push_back(absl::StrCat(m[0].get<std::string>(), " ", m[1].get<std::string>()));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("model.merges entry ", m.dump()));
    }
  }
  return out;
}

// The tokenizer `keys` describe, as Tessera reads it from a GGUF file.
absl::StatusOr<std::unique_ptr<Tokenizer>> FromKeys(const GgufTokenizerKeys& keys) {
  GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  keys.WriteTo(writer);
  auto file = GgufFile::FromBytes(writer.Serialize());
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(**file);
}

// The check text and the text of every added token, each alone and in a
// sentence.
std::vector<std::string> CheckTexts(const GgufTokenizerKeys& keys) {
  std::vector<std::string> texts = {std::string(kCheckText)};
  for (size_t id = 0; id < keys.tokens.size(); ++id) {
    const int32_t type = keys.token_types[id];
    if (type != static_cast<int32_t>(TokenType::kControl) &&
        type != static_cast<int32_t>(TokenType::kUserDefined)) {
      continue;
    }
    texts.push_back(keys.tokens[id]);
    texts.push_back(absl::StrCat("a ", keys.tokens[id], " b\n"));
  }
  return texts;
}

// True when `hf` and `gguf` give the same ids for every text.
bool SameIds(const Tokenizer& hf, const Tokenizer& gguf, const std::vector<std::string>& texts) {
  return std::all_of(texts.begin(), texts.end(), [&](const std::string& t) {
    const EncodeOptions options{hf.add_bos(), /*parse_special=*/true};
    return gguf.Encode(t, options) == hf.Encode(t, options);
  });
}

absl::StatusOr<GgufTokenizerKeys> ByteLevelKeys(Json& root, std::string_view tokenizer_config_json,
                                                std::unique_ptr<Tokenizer> hf,
                                                GgufTokenizerKeys keys) {
  keys.model = "gpt2";
  auto merges = ReadMerges(root);
  if (!merges.ok()) return merges.status();
  keys.merges = *std::move(merges);
  // GGUF has no key for a normalizer: the keys are checked against the
  // tokenizer without it.
  const Json* n = tokenizer_internal::OptionalMember(root, "normalizer");
  // An empty Sequence (DeepSeek V3's) changes nothing.
  const bool no_op = n != nullptr && TypeName(*n) == "Sequence" && n->contains("normalizers") &&
                     (*n)["normalizers"].is_array() && (*n)["normalizers"].empty();
  if (n != nullptr && !no_op) {
    keys.dropped_normalizer = TypeName(*n).empty() ? "?" : TypeName(*n);
    root["normalizer"] = nullptr;
    auto plain = Tokenizer::FromHuggingFace(root.dump(), tokenizer_config_json);
    if (!plain.ok()) return plain.status();
    hf = *std::move(plain);
  }
  const std::vector<std::string> texts = CheckTexts(keys);
  for (std::string_view pre : kPreCandidates) {
    keys.pre = std::string(pre);
    auto gguf = FromKeys(keys);
    if (!gguf.ok()) return gguf.status();
    if (SameIds(*hf, **gguf, texts)) return keys;
  }
  return absl::FailedPreconditionError(
      "no GGUF pre-tokenizer (tokenizer.ggml.pre) reproduces this tokenizer.json's ids");
}

bool IsReplaceSpace(const Json& n) {
  return TypeName(n) == "Replace" && n.contains("pattern") && n["pattern"].is_object() &&
         n["pattern"].value("String", Json()) == Json(" ") &&
         n.value("content", Json()) == Json("\u2581");
}

// SentencePiece's normalization as tokenizer.json writes it: spaces to
// U+2581, maybe after prepending one. Returns whether one is prepended, or
// nothing when the file is not of that kind (byte fallback is required).
std::optional<bool> SentencePieceNormalizer(const Json& root) {
  const Json* model = tokenizer_internal::OptionalMember(root, "model");
  const Json* fallback =
      model != nullptr ? tokenizer_internal::OptionalMember(*model, "byte_fallback") : nullptr;
  if (fallback == nullptr || !fallback->is_boolean() || !fallback->get<bool>()) return std::nullopt;
  const Json* n = tokenizer_internal::OptionalMember(root, "normalizer");
  if (n == nullptr) return std::nullopt;
  if (IsReplaceSpace(*n)) return false;
  if (TypeName(*n) != "Sequence" || !n->contains("normalizers")) return std::nullopt;
  const Json& list = (*n)["normalizers"];
  if (!list.is_array() || list.size() != 2 || !IsReplaceSpace(list[1])) return std::nullopt;
  const Json& prepend = list[0];
  if (TypeName(prepend) != "Prepend" || prepend.value("prepend", Json()) != Json("\u2581")) {
    return std::nullopt;
  }
  return true;
}

// tokenizer.json's other form of SentencePiece: byte fallback, no
// normalizer, and a Metaspace pre-tokenizer with U+2581 that does not split.
// Returns its prepend_scheme, or nothing when the file is not of that kind.
std::optional<tokenizer_internal::MetaspacePrepend> MetaspaceScheme(const Json& root) {
  const Json* model = tokenizer_internal::OptionalMember(root, "model");
  const Json* fallback =
      model != nullptr ? tokenizer_internal::OptionalMember(*model, "byte_fallback") : nullptr;
  if (fallback == nullptr || !fallback->is_boolean() || !fallback->get<bool>()) return std::nullopt;
  if (tokenizer_internal::OptionalMember(root, "normalizer") != nullptr) return std::nullopt;
  const Json* pre = tokenizer_internal::OptionalMember(root, "pre_tokenizer");
  if (pre == nullptr || TypeName(*pre) != "Metaspace") return std::nullopt;
  auto spec = tokenizer_internal::ParseMetaspace(*pre, "pre_tokenizer");
  if (!spec.ok() || spec->replacement != "\u2581" || spec->split) return std::nullopt;
  return spec->prepend;
}

// The prepend_scheme value of tokenizer.json that stands for `scheme`.
const char* PrependSchemeName(tokenizer_internal::MetaspacePrepend scheme) {
  switch (scheme) {
    case tokenizer_internal::MetaspacePrepend::kAlways: return "always";
    case tokenizer_internal::MetaspacePrepend::kFirst: return "first";
    case tokenizer_internal::MetaspacePrepend::kNever: return "never";
  }
  return "?";
}

// `root` with the Metaspace pre-tokenizer as the legacy normalizers: spaces
// to U+2581, after prepending one unless the scheme is "never" (a Prepend
// normalizer prepends to every text between added tokens).
Json LegacySentencePiece(Json root, bool prepend) {
  const Json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  root["pre_tokenizer"] = nullptr;
  root["normalizer"] =
      prepend ? Json{{"type", "Sequence"},
                     {"normalizers", Json::array({{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                  replace})}}
              : replace;
  return root;
}

absl::StatusOr<GgufTokenizerKeys> SentencePieceKeys(const Json& root, const Tokenizer& hf,
                                                    bool add_space_prefix,
                                                    GgufTokenizerKeys keys) {
  keys.model = "llama";
  keys.add_space_prefix = add_space_prefix;
  auto merges = ReadMerges(root);
  if (!merges.ok()) return merges.status();
  absl::flat_hash_map<std::string, int32_t> ids;
  for (size_t id = 0; id < keys.tokens.size(); ++id) ids.emplace(keys.tokens[id], id);
  // A token no merge makes must never win a merge: the lowest score.
  keys.scores.assign(keys.tokens.size(), -1e9f);
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    std::string merged = (*merges)[rank];
    merged.erase(std::remove(merged.begin(), merged.end(), ' '), merged.end());
    auto it = ids.find(merged);
    if (it != ids.end() && keys.scores[it->second] == -1e9f) {
      keys.scores[it->second] = -static_cast<float>(rank);
    }
  }
  const int32_t normal = static_cast<int32_t>(TokenType::kNormal);
  for (size_t id = 0; id < keys.tokens.size(); ++id) {
    if (keys.token_types[id] == normal && IsBytePiece(keys.tokens[id])) {
      keys.token_types[id] = static_cast<int32_t>(TokenType::kByte);
    }
  }
  const Json* model = tokenizer_internal::OptionalMember(root, "model");
  const std::string unk =
      model ? tokenizer_internal::StringMember(*model, "unk_token", "").value_or("") : "";
  if (auto it = ids.find(unk); !unk.empty() && it != ids.end()) {
    keys.unk = it->second;
    keys.token_types[it->second] = static_cast<int32_t>(TokenType::kUnknown);
  }
  auto gguf = FromKeys(keys);
  if (!gguf.ok()) return gguf.status();
  if (!SameIds(hf, **gguf, CheckTexts(keys))) {
    return absl::FailedPreconditionError(
        "the SentencePiece GGUF keys do not reproduce this tokenizer.json's ids (added "
        "tokens with lstrip or rstrip, or merges SentencePiece would not make, have no GGUF "
        "form)");
  }
  return keys;
}

}  // namespace

void GgufTokenizerKeys::WriteTo(GgufWriter& writer) const {
  writer.SetString("tokenizer.ggml.model", model);
  if (!pre.empty()) writer.SetString("tokenizer.ggml.pre", pre);
  writer.SetStringArray("tokenizer.ggml.tokens", tokens);
  writer.SetInt32Array("tokenizer.ggml.token_type", token_types);
  if (model == "gpt2") writer.SetStringArray("tokenizer.ggml.merges", merges);
  if (model == "llama") {
    writer.SetFloat32Array("tokenizer.ggml.scores", scores);
    writer.SetBool("tokenizer.ggml.add_space_prefix", add_space_prefix);
  }
  const std::pair<const char*, int32_t> ids[] = {{"tokenizer.ggml.bos_token_id", bos},
                                                 {"tokenizer.ggml.eos_token_id", eos},
                                                 {"tokenizer.ggml.unknown_token_id", unk}};
  for (const auto& [key, id] : ids) {
    if (id >= 0) writer.SetUint32(key, static_cast<uint32_t>(id));
  }
  writer.SetBool("tokenizer.ggml.add_bos_token", add_bos);
}

absl::StatusOr<GgufTokenizerKeys> HfTokenizerToGguf(std::string_view tokenizer_json,
                                                    std::string_view tokenizer_config_json,
                                                    std::span<const int32_t> eos_ids) {
  auto full = Tokenizer::FromHuggingFace(tokenizer_json, tokenizer_config_json);
  if (!full.ok()) return full.status();
  auto root = ParseObject(tokenizer_json, "tokenizer.json");
  if (!root.ok()) return root.status();
  GgufTokenizerKeys keys;
  if (auto s = ReadTokens(*root, keys); !s.ok()) return s;
  // A missing id is left out, as llama.cpp's converter does (a reader then
  // uses its default, which add_bos false never adds). Other
  // end-of-generation ids are left to the readers, which recognise the
  // usual end-of-turn tokens by their text ("<|eot_id|>", "<|im_end|>"),
  // as for the files llama.cpp's converter writes.
  keys.bos = (*full)->bos_id();
  keys.eos = (*full)->eos_id();
  keys.add_bos = (*full)->add_bos();
  if (keys.eos < 0 && !eos_ids.empty()) keys.eos = eos_ids[0];
  if (HasByteLevel(tokenizer_internal::OptionalMember(*root, "pre_tokenizer"))) {
    return ByteLevelKeys(*root, tokenizer_config_json, *std::move(full), std::move(keys));
  }
  if (auto prefix = SentencePieceNormalizer(*root)) {
    return SentencePieceKeys(*root, **full, *prefix, std::move(keys));
  }
  if (auto scheme = MetaspaceScheme(*root)) {
    const bool prepend = *scheme != tokenizer_internal::MetaspacePrepend::kNever;
    auto legacy = Tokenizer::FromHuggingFace(LegacySentencePiece(*root, prepend).dump(),
                                             tokenizer_config_json);
    if (!legacy.ok()) return legacy.status();
    if (prepend) {
      keys.inexact = absl::StrCat(
          "tokenizer.json's Metaspace pre-tokenizer (prepend_scheme \"",
          PrependSchemeName(*scheme),
          "\") is written as add_space_prefix, which also puts a space in front of text after "
          "a special token and of text that starts with one (as in llama.cpp)");
    }
    return SentencePieceKeys(*root, **legacy, prepend, std::move(keys));
  }
  return absl::UnimplementedError(
      "only byte-level BPE and SentencePiece-style BPE tokenizer.json files are written as "
      "GGUF tokenizer keys");
}

}  // namespace tessera
