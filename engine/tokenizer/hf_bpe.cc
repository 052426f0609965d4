// BPE over merge ranks, as the Rust `tokenizers` crate's models::bpe does.

#include "engine/tokenizer/hf_bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {
namespace {

// Vocabularies larger than this are refused (ids index dense tables).
constexpr int64_t kMaxVocab = 1 << 24;

uint64_t PairKey(TokenId a, TokenId b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

uint64_t CharPairKey(char32_t a, char32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

// A symbol that is not one character of the vocabulary.
constexpr char32_t kNotAChar = 0xFFFFFFFF;

struct Symbol {
  TokenId id;
  int32_t prev;
  int32_t next;
  bool removed;
};

struct Merge {
  int32_t rank;
  int32_t pos;
  TokenId new_id;
};

// Lowest rank first; among equal ranks, the leftmost.
struct MergeOrder {
  bool operator()(const Merge& a, const Merge& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.pos > b.pos);
  }
};

absl::StatusOr<std::string> OptionalString(const Json& model, std::string_view key) {
  const Json* m = OptionalMember(model, key);
  if (m == nullptr) return std::string();
  if (!m->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("model.", AsAbsl(key), " is not a string"));
  }
  return m->get<std::string>();
}

}  // namespace

absl::StatusOr<HfBpe> HfBpe::Parse(const Json& model) {
  HfBpe bpe;
  auto type = TypeOf(model, "model");
  if (!type.ok()) return type.status();
  if (*type != "BPE") return Unsupported(absl::StrCat("model \"", *type, "\""), "model");
  if (const Json* d = OptionalMember(model, "dropout"); d != nullptr) {
    if (!d->is_number()) return absl::InvalidArgumentError("model.dropout is not a number");
    if (d->get<double>() != 0.0) return Unsupported("BPE dropout", "model");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto value = OptionalString(model, key);
    if (!value.ok()) return value.status();
    if (!value->empty()) return Unsupported(key, "model");
  }
  for (auto [key, flag] : {std::pair{"fuse_unk", &bpe.fuse_unk_},
                           std::pair{"byte_fallback", &bpe.byte_fallback_},
                           std::pair{"ignore_merges", &bpe.ignore_merges_}}) {
    auto value = BoolMember(model, key, false, "model");
    if (!value.ok()) return value.status();
    *flag = *value;
  }
  auto vocab = Member(model, "vocab", "model");
  if (!vocab.ok()) return vocab.status();
  if (absl::Status s = bpe.ParseVocab(**vocab); !s.ok()) return s;
  auto merges = Member(model, "merges", "model");
  if (!merges.ok()) return merges.status();
  if (absl::Status s = bpe.ParseMerges(**merges); !s.ok()) return s;
  auto unk = OptionalString(model, "unk_token");
  if (!unk.ok()) return unk.status();
  if (!unk->empty()) {
    bpe.unk_id_ = bpe.Find(*unk);
    if (bpe.unk_id_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat("model.unk_token \"", *unk, "\" is not in the vocabulary"));
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    bpe.byte_ids_[b] = bpe.Find(name);
  }
  return bpe;
}

absl::Status HfBpe::ParseVocab(const Json& vocab) {
  if (!vocab.is_object()) return absl::InvalidArgumentError("model.vocab is not an object");
  if (vocab.empty()) return absl::InvalidArgumentError("model.vocab is empty");
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() >= kMaxVocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.vocab[\"", it.key(), "\"] is not an id in [0, 2^24)"));
    }
    if (!IsValidUtf8(it.key()) || it.key().empty()) {
      return absl::InvalidArgumentError("model.vocab has an empty or ill-formed token");
    }
    max_id = std::max(max_id, it->get<int64_t>());
    vocab_[it.key()] = static_cast<TokenId>(it->get<int64_t>());
  }
  // Ids are dense in practice; far-off ids would only make the tables huge.
  if (max_id >= 2 * static_cast<int64_t>(vocab_.size()) + 256) {
    return absl::InvalidArgumentError(absl::StrCat("model.vocab: id ", max_id, " is far beyond its ",
                                                   vocab_.size(), " entries"));
  }
  tokens_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [text, id] : vocab_) {
    if (!tokens_[static_cast<size_t>(id)].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("model.vocab: id ", id, " is used twice"));
    }
    tokens_[static_cast<size_t>(id)] = text;
    if (const Utf8Step step = DecodeUtf8(text);
        step.status == Utf8Status::kValid && step.len == text.size()) {
      char_ids_[step.codepoint] = id;
    }
  }
  return absl::OkStatus();
}

absl::Status HfBpe::ParseMerges(const Json& merges) {
  if (!merges.is_array()) return absl::InvalidArgumentError("model.merges is not an array");
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    std::string left, right;
    if (m.is_string()) {  // "left right"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 >= s.size() ||
          s.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("model.merges[", i, "] is not \"left right\""));
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat("model.merges[", i, "] is not a pair of strings"));
    }
    const TokenId a = Find(left), b = Find(right), merged = Find(left + right);
    if (a < 0 || b < 0 || merged < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.merges[", i, "] (\"", left, "\", \"", right, "\") is not in the vocabulary"));
    }
    merges_.try_emplace(PairKey(a, b), static_cast<int32_t>(i), merged);
    joinable_.insert(CharPairKey(DecodeLastUtf8(left).codepoint, DecodeUtf8(right).codepoint));
  }
  return absl::OkStatus();
}

TokenId HfBpe::CharId(const Utf8Step& step, std::string_view ch) const {
  if (step.status != Utf8Status::kValid) return Find(ch);
  auto it = char_ids_.find(step.codepoint);
  return it == char_ids_.end() ? -1 : it->second;
}

TokenId HfBpe::Find(std::string_view text) const {
  auto it = vocab_.find(AsAbsl(text));
  return it == vocab_.end() ? -1 : it->second;
}

void HfBpe::InitialSymbols(std::string_view word, std::vector<TokenId>* ids,
                           std::vector<char32_t>* cps, std::vector<uint32_t>* starts) const {
  bool last_unk = false;
  auto note = [&](size_t count, char32_t cp, size_t at) {
    if (cps == nullptr) return;
    cps->insert(cps->end(), count, cp);
    starts->insert(starts->end(), count, static_cast<uint32_t>(at));
  };
  for (size_t pos = 0; pos < word.size();) {
    const Utf8Step step = DecodeUtf8(word.substr(pos));
    const size_t len = step.status == Utf8Status::kValid ? step.len : 1;
    const std::string_view ch = word.substr(pos, len);
    const size_t at = pos;
    pos += len;
    if (TokenId id = CharId(step, ch); id >= 0) {
      ids->push_back(id);
      note(1, step.codepoint, at);
      last_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : ch) ids->push_back(byte_ids_[static_cast<uint8_t>(c)]);
        note(ch.size(), kNotAChar, at);
        last_unk = false;
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // without an unknown token the character is dropped
    if (!(fuse_unk_ && last_unk)) {
      ids->push_back(unk_id_);
      note(1, kNotAChar, at);
    }
    last_unk = true;
  }
}

void HfBpe::Encode(std::string_view word, std::vector<TokenId>* out, PieceCache* parts) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (TokenId id = Find(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  if (word.size() >= kLongPieceBytes) return EncodeInParts(word, out, parts);
  EncodeWhole(word, out);
}

void HfBpe::EncodeWhole(std::string_view word, std::vector<TokenId>* out) const {
  std::vector<TokenId> ids;
  InitialSymbols(word, &ids);
  MergeSymbols(ids.data(), static_cast<int32_t>(ids.size()), out);
}

// A merge joins a symbol ending in character p to one starting in q only if
// (p, q) is in joinable_, so no symbol ever spans two characters whose pair
// is not: the parts between such pairs merge independently, and encoding
// them apart gives the ids of the whole word. A part starts with a
// character of the vocabulary, so its symbols do not depend on what came
// before it, and a part seen before gets the same ids again.
void HfBpe::EncodeInParts(std::string_view word, std::vector<TokenId>* out,
                          PieceCache* parts) const {
  PieceCache local;
  PieceCache& cache = parts != nullptr ? *parts : local;
  std::vector<TokenId> ids;
  std::vector<char32_t> cps;
  std::vector<uint32_t> starts;
  InitialSymbols(word, &ids, &cps, &starts);
  auto part = [&](size_t begin, size_t end) {
    const size_t byte_end = end < ids.size() ? starts[end] : word.size();
    const std::string_view text = word.substr(starts[begin], byte_end - starts[begin]);
    if (cache.CopyTo(text, out)) return;
    const size_t first = out->size();
    MergeSymbols(ids.data() + begin, static_cast<int32_t>(end - begin), out);
    cache.Remember(text, first, *out);
  };
  size_t begin = 0;
  for (size_t i = 1; i < ids.size(); ++i) {
    if (cps[i - 1] == kNotAChar || cps[i] == kNotAChar ||
        joinable_.contains(CharPairKey(cps[i - 1], cps[i]))) {
      continue;
    }
    part(begin, i);
    begin = i;
  }
  if (!ids.empty()) part(begin, ids.size());
}

void HfBpe::MergeSymbols(const TokenId* ids, int32_t n, std::vector<TokenId>* out) const {
  if (n <= 0) return;
  std::vector<Symbol> syms(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) syms[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, false};
  std::priority_queue<Merge, std::vector<Merge>, MergeOrder> queue;
  auto try_add = [&](int32_t left) {
    if (left < 0 || syms[left].next < 0) return;
    auto it = merges_.find(PairKey(syms[left].id, syms[syms[left].next].id));
    if (it != merges_.end()) queue.push({it->second.first, left, it->second.second});
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i);
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& left = syms[top.pos];
    if (left.removed || left.next < 0) continue;
    Symbol& right = syms[left.next];
    auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.second != top.new_id) continue;  // stale
    left.id = top.new_id;
    right.removed = true;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = top.pos;
    try_add(left.prev);
    try_add(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
}

}  // namespace tessera::tokenizer_internal
