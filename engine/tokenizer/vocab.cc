// Reading and validating `tokenizer.ggml.*` metadata.

#include "engine/tokenizer/vocab.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/bpe_pre.h"
#include "engine/model/gguf.h"

namespace tessera::tokenizer_internal {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";

absl::Status WithKey(std::string_view key, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(AsAbsl(key), ": ", status.message()));
}

absl::Status ReadTokens(const GgufFile& file, VocabData* v) {
  auto tokens = file.GetStringArray(kTokensKey);
  if (!tokens.ok()) return WithKey(kTokensKey, tokens.status());
  if (tokens->empty()) return absl::InvalidArgumentError("tokenizer.ggml.tokens is empty");
  if (tokens->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("tokenizer.ggml.tokens: too many tokens");
  }
  for (size_t i = 0; i < tokens->size(); ++i) {
    if ((*tokens)[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.tokens: token ", i, " is empty"));
    }
  }
  v->tokens = *std::move(tokens);
  return absl::OkStatus();
}

// Types come from the file when present; otherwise byte pieces are
// recognised by their text and special ids are marked after they are read.
absl::Status ReadTypes(const GgufFile& file, VocabData* v) {
  const size_t n = v->tokens.size();
  v->types.assign(n, TokenType::kNormal);
  if (file.FindValue(kTypesKey) == nullptr) {
    if (v->model == "llama") {
      for (size_t i = 0; i < n; ++i) {
        if (IsBytePiece(v->tokens[i])) v->types[i] = TokenType::kByte;
      }
    }
    return absl::OkStatus();
  }
  auto types = file.GetIntArray(kTypesKey);
  if (!types.ok()) return WithKey(kTypesKey, types.status());
  if (types->size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.token_type has ", types->size(),
                                                   " entries for ", n, " tokens"));
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = (*types)[i];
    if (t < 0 || t > static_cast<int64_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.token_type: token ", i, " has unknown type ", t));
    }
    v->types[i] = static_cast<TokenType>(t);
  }
  return absl::OkStatus();
}

absl::Status ReadScores(const GgufFile& file, VocabData* v) {
  const size_t n = v->tokens.size();
  v->scores.assign(n, 0.0f);
  if (file.FindValue(kScoresKey) == nullptr) return absl::OkStatus();
  auto scores = file.GetFloatArray(kScoresKey);
  if (!scores.ok()) return WithKey(kScoresKey, scores.status());
  if (scores->size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.ggml.scores has ", scores->size(), " entries for ", n, " tokens"));
  }
  for (size_t i = 0; i < n; ++i) {
    // NaN would break the strict ordering of the merge queue.
    if (std::isnan((*scores)[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.scores: token ", i, " is NaN"));
    }
    v->scores[i] = static_cast<float>((*scores)[i]);
  }
  return absl::OkStatus();
}

absl::Status ReadMerges(const GgufFile& file, VocabData* v) {
  if (file.FindValue(kPreKey) != nullptr) {
    auto pre = file.GetString(kPreKey);
    if (!pre.ok()) return WithKey(kPreKey, pre.status());
    v->pre = *std::move(pre);
  }
  auto merges = file.GetStringArray(kMergesKey);
  if (!merges.ok()) return WithKey(kMergesKey, merges.status());
  for (size_t i = 0; i < merges->size(); ++i) {
    // "left right": split at the first space after the first byte, as
    // llama.cpp does, so that a left part may itself start with a space.
    const std::string& m = (*merges)[i];
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos || space + 1 >= m.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.merges: entry ", i, " \"", m, "\" is not \"left right\""));
    }
  }
  v->merges = *std::move(merges);
  return absl::OkStatus();
}

// -1 and 0xFFFFFFFF (-1 stored as uint32) mean "no such token".
absl::StatusOr<TokenId> ReadSpecialId(const GgufFile& file, std::string_view key, TokenId fallback,
                                      size_t vocab_size) {
  const auto n = static_cast<int64_t>(vocab_size);
  if (file.FindValue(key) == nullptr) return fallback >= 0 && fallback < n ? fallback : -1;
  auto id = file.GetInt(key);
  if (!id.ok()) return WithKey(key, id.status());
  if (*id == -1 || *id == 0xFFFFFFFFll) return -1;
  if (*id < 0 || *id >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(key), " = ", *id, " is outside the vocabulary of ", n, " tokens"));
  }
  return static_cast<TokenId>(*id);
}

TokenId FindToken(const VocabData& v, std::string_view text) {
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == text) return static_cast<TokenId>(i);
  }
  return -1;
}

absl::Status ReadSpecialIds(const GgufFile& file, VocabData* v) {
  const bool llama = v->model == "llama";
  TokenId bos_default = 1, eos_default = 2, unk_default = 0;
  if (!llama) {
    const TokenId eot_text = FindToken(*v, "<|endoftext|>");
    bos_default = eos_default = eot_text >= 0 ? eot_text : 50256;
    unk_default = -1;
  }
  const size_t n = v->tokens.size();
  const std::pair<std::string_view, TokenId*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &v->bos},
      {"tokenizer.ggml.eos_token_id", &v->eos},
      {"tokenizer.ggml.unknown_token_id", &v->unk},
      {"tokenizer.ggml.eot_token_id", &v->eot},
      {"tokenizer.ggml.eom_token_id", &v->eom},
  };
  const TokenId defaults[] = {bos_default, eos_default, unk_default, -1, -1};
  for (size_t i = 0; i < std::size(keys); ++i) {
    auto id = ReadSpecialId(file, keys[i].first, defaults[i], n);
    if (!id.ok()) return id.status();
    *keys[i].second = *id;
  }
  // Validated for range only; padding is not used by the tokenizer.
  auto pad = ReadSpecialId(file, "tokenizer.ggml.padding_token_id", -1, n);
  return pad.status();
}

absl::Status ReadFlags(const GgufFile& file, bool add_bos_default, VocabData* v) {
  const bool llama = v->model == "llama";
  auto add_bos = file.GetBoolOr("tokenizer.ggml.add_bos_token", add_bos_default);
  if (!add_bos.ok()) return WithKey("tokenizer.ggml.add_bos_token", add_bos.status());
  v->add_bos = *add_bos;
  if (llama) {
    auto prefix = file.GetBoolOr("tokenizer.ggml.add_space_prefix", true);
    if (!prefix.ok()) return WithKey("tokenizer.ggml.add_space_prefix", prefix.status());
    v->add_space_prefix = *prefix;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VocabData> ReadVocab(const GgufFile& file) {
  VocabData v;
  if (file.FindValue(kModelKey) == nullptr) {
    return absl::InvalidArgumentError("GGUF file has no tokenizer.ggml.model");
  }
  auto model = file.GetString(kModelKey);
  if (!model.ok()) return WithKey(kModelKey, model.status());
  if (*model != "llama" && *model != "gpt2") {
    return absl::UnimplementedError(absl::StrCat("unsupported tokenizer model \"", *model, "\""));
  }
  v.model = *model;
  const bool has_types = file.FindValue(kTypesKey) != nullptr;
  absl::Status s = ReadTokens(file, &v);
  if (s.ok()) s = ReadTypes(file, &v);
  if (s.ok()) s = v.model == "llama" ? ReadScores(file, &v) : ReadMerges(file, &v);
  if (s.ok()) s = ReadSpecialIds(file, &v);
  bool add_bos_default = v.model == "llama";
  if (s.ok() && v.model == "gpt2") {
    auto pre = GgufBpePreTokenizer(v.pre);
    if (!pre.ok()) return pre.status();
    add_bos_default = pre->add_bos;
  }
  if (s.ok()) s = ReadFlags(file, add_bos_default, &v);
  if (!s.ok()) return s;
  auto name = file.GetStringOr("general.name", "");
  if (!name.ok()) return WithKey("general.name", name.status());
  v.name = absl::AsciiStrToLower(*name);
  if (!has_types) {
    // Without types, the special ids are the only control tokens we know.
    for (TokenId id : {v.bos, v.eos, v.eot}) {
      if (id >= 0) v.types[static_cast<size_t>(id)] = TokenType::kControl;
    }
    if (v.unk >= 0) v.types[static_cast<size_t>(v.unk)] = TokenType::kUnknown;
  }
  FindEndOfGeneration(&v);
  return v;
}

VocabTokenizer::VocabTokenizer(VocabData& vocab)
    : tokens_(std::move(vocab.tokens)), types_(std::move(vocab.types)), unk_id_(vocab.unk) {
  vocab_size_ = static_cast<int32_t>(tokens_.size());
  bos_id_ = vocab.bos;
  eos_id_ = vocab.eos;
  eot_id_ = vocab.eot;
  eom_id_ = vocab.eom;
  add_bos_ = vocab.add_bos;
  add_space_prefix_ = vocab.add_space_prefix;
  AddEndOfGenerationIds(vocab.eog);
  text_to_id_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) text_to_id_[tokens_[i]] = static_cast<TokenId>(i);
  InitSpecialTokens(vocab.name);
}

const std::string& VocabTokenizer::TokenText(TokenId id) const {
  static const std::string* const kEmpty = new std::string();
  return InRange(id) ? tokens_[static_cast<size_t>(id)] : *kEmpty;
}

bool VocabTokenizer::IsControl(TokenId id) const {
  return InRange(id) && type(id) == TokenType::kControl;
}

TokenId VocabTokenizer::FindToken(std::string_view text) const {
  auto it = text_to_id_.find(AsAbsl(text));
  return it == text_to_id_.end() ? -1 : it->second;
}

bool IsBytePiece(std::string_view text) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return text.size() == 6 && text.substr(0, 3) == "<0x" && hex(text[3]) && hex(text[4]) &&
         text[5] == '>';
}

}  // namespace tessera::tokenizer_internal
