// A Tokenizer over tokenizer.json: added tokens, normalizer, pre-tokenizer,
// BPE model, post-processor and decoder, in the Rust crate's order.

#include "engine/tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/hf_added.h"
#include "engine/tokenizer/hf_bpe.h"
#include "engine/tokenizer/hf_components.h"
#include "engine/tokenizer/hf_json.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {
namespace {

// The special ids a TemplateProcessing puts around a single sequence.
struct Template {
  std::vector<TokenId> prefix;
  std::vector<TokenId> suffix;
};

absl::Status ParseTemplateProcessing(const Json& spec, std::string_view where, int32_t vocab_size,
                                     Template* out) {
  auto single = Member(spec, "single", where);
  if (!single.ok()) return single.status();
  auto specials = Member(spec, "special_tokens", where);
  if (!specials.ok()) return specials.status();
  if (!(*single)->is_array() || !(*specials)->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), ": single must be an array, special_tokens an object"));
  }
  bool seen_sequence = false;
  for (const Json& item : **single) {
    if (const Json* seq = OptionalMember(item, "Sequence"); seq != nullptr) {
      auto id = StringMember(*seq, "id", where);
      if (!id.ok()) return id.status();
      if (*id != "A" || seen_sequence) return Unsupported("template other than one \"A\"", where);
      seen_sequence = true;
      continue;
    }
    const Json* tok = OptionalMember(item, "SpecialToken");
    if (tok == nullptr) return absl::InvalidArgumentError(absl::StrCat(AsAbsl(where), ": bad template item"));
    auto name = StringMember(*tok, "id", where);
    if (!name.ok()) return name.status();
    auto entry = Member(**specials, *name, absl::StrCat(AsAbsl(where), ".special_tokens"));
    if (!entry.ok()) return entry.status();
    auto ids = Member(**entry, "ids", absl::StrCat(AsAbsl(where), ".special_tokens.", *name));
    if (!ids.ok()) return ids.status();
    if (!(*ids)->is_array()) return absl::InvalidArgumentError(absl::StrCat(AsAbsl(where), ": ids is not an array"));
    for (const Json& id : **ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(AsAbsl(where), ": special id out of range"));
      }
      (seen_sequence ? out->suffix : out->prefix).push_back(static_cast<TokenId>(id.get<int64_t>()));
    }
  }
  if (!seen_sequence) return absl::InvalidArgumentError(absl::StrCat(AsAbsl(where), ": no \"A\" sequence"));
  return absl::OkStatus();
}

absl::Status ParsePostProcessor(const Json* spec, std::string_view where, int32_t vocab_size,
                                Template* out) {
  if (spec == nullptr) return absl::OkStatus();
  auto type = TypeOf(*spec, where);
  if (!type.ok()) return type.status();
  if (*type == "ByteLevel") return absl::OkStatus();  // offsets only
  if (*type == "TemplateProcessing") return ParseTemplateProcessing(*spec, where, vocab_size, out);
  if (*type == "Sequence") {
    auto list = Member(*spec, "processors", where);
    if (!list.ok()) return list.status();
    if (!(*list)->is_array()) return absl::InvalidArgumentError("post_processor.processors is not an array");
    for (const Json& item : **list) {
      if (absl::Status s = ParsePostProcessor(&item, where, vocab_size, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return Unsupported(absl::StrCat("post-processor \"", *type, "\""), where);
}

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const Json& root) {
  std::vector<AddedToken> added;
  const Json* list = OptionalMember(root, "added_tokens");
  if (list == nullptr) return added;
  if (!list->is_array()) return absl::InvalidArgumentError("added_tokens is not an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& t = (*list)[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    AddedToken tok;
    auto id = Member(t, "id", where);
    if (!id.ok()) return id.status();
    if (!(*id)->is_number_integer() || (*id)->get<int64_t>() < 0 || (*id)->get<int64_t>() >= (1 << 24)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".id is not an id in [0, 2^24)"));
    }
    tok.id = static_cast<TokenId>((*id)->get<int64_t>());
    auto content = StringMember(t, "content", where);
    if (!content.ok()) return content.status();
    if (content->empty() || !IsValidUtf8(*content)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".content is empty or not UTF-8"));
    }
    tok.content = *content;
    for (auto [key, flag, fallback] :
         {std::tuple{"single_word", &tok.single_word, false}, std::tuple{"lstrip", &tok.lstrip, false},
          std::tuple{"rstrip", &tok.rstrip, false}, std::tuple{"special", &tok.special, false}}) {
      auto v = BoolMember(t, key, fallback, where);
      if (!v.ok()) return v.status();
      *flag = *v;
    }
    auto normalized = BoolMember(t, "normalized", !tok.special, where);
    if (!normalized.ok()) return normalized.status();
    tok.normalized = *normalized;
    added.push_back(std::move(tok));
  }
  return added;
}

class HfTokenizer final : public Tokenizer {
 public:
  absl::Status Init(const Json& root, const Json* config);

  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options) const override;
  std::string TokenBytes(TokenId id) const override;
  const std::string& TokenText(TokenId id) const override;
  std::string_view model_name() const override { return "hf-bpe"; }
  bool IsControl(TokenId id) const override {
    return id >= 0 && id < vocab_size_ && special_[static_cast<size_t>(id)];
  }

 private:
  absl::Status InitSpecialIds(const Json* config);
  // Words, and parts of long words (HfBpe::Encode), seen before in one
  // Encode call are not merged again.
  struct WordCache {
    PieceCache words, parts;
  };
  // `at_start`: `text` begins the input (for Metaspace's "first").
  void EncodeText(std::string_view text, bool at_start, WordCache* cache,
                  std::vector<TokenId>* out) const;
  void EncodeWord(std::string_view word, WordCache* cache, std::vector<TokenId>* out) const;
  absl::StatusOr<TokenId> ConfigToken(const Json& config, std::string_view key) const;

  HfNormalizer normalizer_;
  HfPreTokenizer pre_tokenizer_;
  HfBpe model_ = {};
  HfDecoder decoder_;
  Template template_;
  std::vector<AddedToken> added_;
  // Copies of the normalized added tokens with their content normalized, as
  // the crate matches them in normalized text.
  std::deque<AddedToken> normalized_added_;
  AddedTokenMatcher raw_matcher_;         // normalized == false
  AddedTokenMatcher normalized_matcher_;  // normalized == true, matched after normalizing
  std::vector<std::string> texts_;        // by id
  std::vector<bool> special_;             // by id
};

absl::Status HfTokenizer::Init(const Json& root, const Json* config) {
  if (!root.is_object()) return absl::InvalidArgumentError("tokenizer.json is not an object");
  for (const char* key : {"truncation", "padding"}) {
    if (OptionalMember(root, key) != nullptr) return Unsupported(key, "tokenizer.json");
  }
  auto model_spec = Member(root, "model", "tokenizer.json");
  if (!model_spec.ok()) return model_spec.status();
  auto model = HfBpe::Parse(**model_spec);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  auto normalizer = HfNormalizer::Parse(OptionalMember(root, "normalizer"));
  if (!normalizer.ok()) return normalizer.status();
  normalizer_ = *std::move(normalizer);
  auto pre = HfPreTokenizer::Parse(OptionalMember(root, "pre_tokenizer"));
  if (!pre.ok()) return pre.status();
  pre_tokenizer_ = *std::move(pre);
  auto decoder = HfDecoder::Parse(OptionalMember(root, "decoder"));
  if (!decoder.ok()) return decoder.status();
  decoder_ = *std::move(decoder);
  auto added = ParseAddedTokens(root);
  if (!added.ok()) return added.status();
  added_ = *std::move(added);

  texts_ = model_.tokens();
  for (const AddedToken& t : added_) {
    if (static_cast<size_t>(t.id) >= texts_.size() + added_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("added_tokens: id ", t.id,
                                                     " is far beyond the vocabulary"));
    }
  }
  for (const AddedToken& t : added_) {
    if (static_cast<size_t>(t.id) >= texts_.size()) texts_.resize(static_cast<size_t>(t.id) + 1);
  }
  vocab_size_ = static_cast<int32_t>(texts_.size());
  special_.assign(texts_.size(), false);
  for (const AddedToken& t : added_) {
    texts_[static_cast<size_t>(t.id)] = t.content;
    special_[static_cast<size_t>(t.id)] = t.special;
    if (t.normalized && !normalizer_.empty()) {
      normalized_added_.push_back(t);
      normalized_added_.back().content = normalizer_.Apply(t.content);
      normalized_matcher_.Add(normalized_added_.back());
    } else {
      raw_matcher_.Add(t);
    }
  }
  if (absl::Status s = ParsePostProcessor(OptionalMember(root, "post_processor"), "post_processor",
                                          vocab_size_, &template_);
      !s.ok()) {
    return s;
  }
  add_space_prefix_ = decoder_.strips_leading_space();
  return InitSpecialIds(config);
}

absl::StatusOr<TokenId> HfTokenizer::ConfigToken(const Json& config, std::string_view key) const {
  const Json* v = OptionalMember(config, key);
  if (v == nullptr) return -1;
  std::string content;
  if (v->is_string()) {
    content = v->get<std::string>();
  } else if (v->is_object() && OptionalMember(*v, "content") != nullptr &&
             (*v)["content"].is_string()) {
    content = (*v)["content"].get<std::string>();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer_config.json: ", AsAbsl(key), " is not a string or {content}"));
  }
  for (const AddedToken& t : added_) {
    if (t.content == content) return t.id;
  }
  if (TokenId id = model_.Find(content); id >= 0) return id;
  return absl::InvalidArgumentError(absl::StrCat("tokenizer_config.json: ", AsAbsl(key), " \"",
                                                 content, "\" is not a token"));
}

absl::Status HfTokenizer::InitSpecialIds(const Json* config) {
  if (config != nullptr && !config->is_object()) {
    return absl::InvalidArgumentError("tokenizer_config.json is not an object");
  }
  if (config != nullptr) {
    auto bos = ConfigToken(*config, "bos_token");
    if (!bos.ok()) return bos.status();
    auto eos = ConfigToken(*config, "eos_token");
    if (!eos.ok()) return eos.status();
    bos_id_ = *bos;
    eos_id_ = *eos;
  }
  // BOS is what the post-processor puts in front, as the crate adds it.
  add_bos_ = !template_.prefix.empty();
  if (bos_id_ < 0 && add_bos_) bos_id_ = template_.prefix.front();
  return absl::OkStatus();
}

void HfTokenizer::EncodeWord(std::string_view word, WordCache* cache,
                             std::vector<TokenId>* out) const {
  if (cache->words.CopyTo(word, out)) return;
  const size_t first = out->size();
  if (pre_tokenizer_.byte_level()) {
    std::string mapped;
    mapped.reserve(word.size() * 2);
    for (char c : word) mapped += ByteLevelChar(static_cast<uint8_t>(c));
    model_.Encode(mapped, out, &cache->parts);
  } else {
    model_.Encode(word, out, &cache->parts);
  }
  cache->words.Remember(word, first, *out);
}

void HfTokenizer::EncodeText(std::string_view text, bool at_start, WordCache* cache,
                             std::vector<TokenId>* out) const {
  const std::string normalized = normalizer_.Apply(text);
  std::vector<Fragment> pieces;
  normalized_matcher_.Split(normalized, /*skip_special=*/false, &pieces);
  std::vector<std::string_view> words;
  std::deque<std::string> storage;
  for (const Fragment& f : pieces) {
    if (f.token >= 0) {
      out->push_back(f.token);
      continue;
    }
    words.clear();
    pre_tokenizer_.Split(std::string_view(normalized).substr(f.begin, f.end - f.begin),
                         at_start && f.begin == 0, &words, &storage);
    for (std::string_view w : words) EncodeWord(w, cache, out);
  }
}

std::vector<TokenId> HfTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<TokenId> out;
  if (options.add_bos) {
    if (template_.prefix.empty() && template_.suffix.empty() && bos_id_ >= 0) out.push_back(bos_id_);
    out.insert(out.end(), template_.prefix.begin(), template_.prefix.end());
  }
  std::vector<Fragment> pieces;
  raw_matcher_.Split(text, /*skip_special=*/!options.parse_special, &pieces);
  WordCache cache;
  out.reserve(out.size() + text.size() / 3 + 1);
  for (const Fragment& f : pieces) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else {
      EncodeText(text.substr(f.begin, f.end - f.begin), f.begin == 0, &cache, &out);
    }
  }
  if (options.add_bos) out.insert(out.end(), template_.suffix.begin(), template_.suffix.end());
  return out;
}

std::string HfTokenizer::TokenBytes(TokenId id) const {
  if (id < 0 || id >= vocab_size_) return "";
  const size_t i = static_cast<size_t>(id);
  // Special tokens decode to nothing; other added tokens go through the
  // decoder like vocabulary entries, as the crate's decode does.
  if (special_[i]) return "";
  return decoder_.TokenBytes(texts_[i]);
}

const std::string& HfTokenizer::TokenText(TokenId id) const {
  static const std::string* const kEmpty = new std::string();
  return id >= 0 && id < vocab_size_ ? texts_[static_cast<size_t>(id)] : *kEmpty;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeHfTokenizer(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config_json) {
  const Json root = Json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("tokenizer.json is not valid JSON");
  Json config;
  const bool has_config = !tokenizer_config_json.empty();
  if (has_config) {
    config = Json::parse(tokenizer_config_json, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded()) {
      return absl::InvalidArgumentError("tokenizer_config.json is not valid JSON");
    }
  }
  auto tokenizer = std::make_unique<HfTokenizer>();
  if (absl::Status s = tokenizer->Init(root, has_config ? &config : nullptr); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace tessera::tokenizer_internal
