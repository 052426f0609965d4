// Special tokens of GGUF vocabularies: the end-of-generation tokens llama.cpp
// recognises by their text, and the matching of special tokens in the input
// before it is tokenized (llama.cpp's tokenizer_st_partition).

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {
namespace {

using Texts = std::span<const std::string_view>;

// llama.cpp (src/llama-vocab.cpp, load()) lists these by text.
constexpr std::string_view kEotTexts[] = {"<|eot_id|>",    "<|im_end|>",      "<|end|>", "<end_of_turn>",
                             "<|endoftext|>", "<|end_of_text|>", "<EOT>",   "_<EOT>",
                             "[EOT]",         "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81"
                             "sentence\xEF\xBD\x9C>",
                             "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
// FIM tokens that do not end generation but are control tokens all the same.
constexpr std::string_view kFimOtherTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xE2\x96\x81<PRE>",
    "<|code_prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",
    "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>"};
constexpr std::string_view kEogTexts[] = {"<|eot_id|>",
                             "<|im_end|>",
                             "<|end|>",
                             "<|return|>",
                             "<|call|>",
                             "<|flush|>",
                             "<|calls|>",
                             "<end_of_turn>",
                             "<|endoftext|>",
                             "</s>",
                             "<|eom_id|>",
                             "<EOT>",
                             "_<EOT>",
                             "[EOT]",
                             "[EOS]",
                             "<|end_of_text|>",
                             "<end_of_utterance>",
                             "<eos>",
                             "<turn|>",
                             "<|tool_response>"};

bool In(std::string_view s, Texts texts) {
  return std::find(texts.begin(), texts.end(), s) != texts.end();
}

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

}  // namespace

void FindEndOfGeneration(VocabData* v) {
  TokenId fim[3] = {-1, -1, -1};  // pad, repo, file separator
  const Texts fim_texts[3] = {kFimPadTexts, kFimRepTexts, kFimSepTexts};
  auto mark = [&](size_t i) { v->types[i] = TokenType::kControl; };
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    const std::string& t = v->tokens[i];
    const auto id = static_cast<TokenId>(i);
    if (v->eot < 0 && In(t, kEotTexts)) v->eot = id, mark(i);
    if (v->eom < 0 && In(t, kEomTexts)) v->eom = id, mark(i);
    for (int k = 0; k < 3; ++k) {
      if (fim[k] < 0 && In(t, fim_texts[k])) fim[k] = id, mark(i);
    }
    if (In(t, kFimOtherTexts)) mark(i);
    if (In(t, kEogTexts)) v->eog.push_back(id), mark(i);
  }
  for (TokenId id : {fim[0], fim[1], fim[2], v->eos, v->eot, v->eom}) {
    if (id >= 0) v->eog.push_back(id);
  }
  std::sort(v->eog.begin(), v->eog.end());
  v->eog.erase(std::unique(v->eog.begin(), v->eog.end()), v->eog.end());
}

void VocabTokenizer::InitSpecialTokens(std::string_view name) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const TokenType t = types_[i];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      special_ids_.push_back(static_cast<TokenId>(i));
    }
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(), [&](TokenId a, TokenId b) {
    return tokens_[static_cast<size_t>(a)].size() > tokens_[static_cast<size_t>(b)].size();
  });
  for (size_t k = 0; k < special_ids_.size(); ++k) {
    const std::string& t = tokens_[static_cast<size_t>(special_ids_[k])];
    special_index_.emplace(AsAbsl(t), k);
    if (t.size() == 1) {
      special_single_[static_cast<uint8_t>(t[0])] = true;
      continue;
    }
    const uint16_t start = SpecialStart(t);
    special_starts_[start >> 3] |= static_cast<uint8_t>(1u << (start & 7));
    std::vector<size_t>& lengths = special_lengths_[start];
    if (lengths.empty() || lengths.back() != t.size()) lengths.push_back(t.size());
  }
  strip_.assign(tokens_.size(), 0);
  // llama.cpp's per-model attributes: Phi-3's special tokens swallow the
  // whitespace after them.
  if (name.find("phi-3") != std::string_view::npos || name.find("phi3") != std::string_view::npos) {
    for (TokenId id : special_ids_) strip_[static_cast<size_t>(id)] = kStripRight;
    if (TokenId id = FindToken("</s>"); id >= 0) strip_[static_cast<size_t>(id)] = kStripRight;
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (TokenId id = FindToken(t); id >= 0) strip_[static_cast<size_t>(id)] = 0;
    }
  }
}

std::vector<TokenId> VocabTokenizer::Encode(std::string_view text,
                                            const EncodeOptions& options) const {
  std::vector<TokenId> out;
  if (options.add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  if (text.empty()) return out;
  out.reserve(out.size() + text.size() / 3 + 1);
  bool after_special = true;
  PieceCache cache;
  for (const Fragment& f : Partition(text, options.parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      EncodeFragment(text.substr(f.begin, f.end - f.begin), after_special, &cache, &out);
      after_special = false;
    }
  }
  return out;
}

std::vector<Fragment> VocabTokenizer::Partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags = {{-1, 0, text.size()}};
  // Which special tokens occur anywhere in the text: one pass, looking up
  // only the lengths that special tokens have.
  std::vector<char> found(special_ids_.size(), 0);
  bool any = false;
  for (size_t p = 0; p < text.size(); ++p) {
    auto look = [&](size_t len) {
      if (p + len > text.size()) return;
      auto it = special_index_.find(AsAbsl(text.substr(p, len)));
      if (it != special_index_.end()) found[it->second] = any = true;
    };
    if (special_single_[static_cast<uint8_t>(text[p])]) look(1);
    if (p + 1 >= text.size()) continue;
    const uint16_t start = SpecialStart(text.substr(p, 2));
    if ((special_starts_[start >> 3] >> (start & 7) & 1) == 0) continue;
    for (size_t len : special_lengths_.at(start)) look(len);
  }
  if (!any) return frags;
  std::vector<Fragment> next;
  for (size_t k = 0; k < special_ids_.size(); ++k) {
    if (!found[k]) continue;
    const TokenId id = special_ids_[k];
    const TokenType t = type(id);
    if (!parse_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    next.clear();
    SplitAt(id, text, frags, &next);
    frags.swap(next);
  }
  return frags;
}

void VocabTokenizer::SplitAt(TokenId id, std::string_view text, const std::vector<Fragment>& in,
                             std::vector<Fragment>* out) const {
  const std::string& tok = tokens_[static_cast<size_t>(id)];
  const uint8_t strip = strip_[static_cast<size_t>(id)];
  for (const Fragment& f : in) {
    if (f.token >= 0) {
      out->push_back(f);
      continue;
    }
    size_t off = f.begin;
    const std::string_view window = text.substr(0, f.end);
    while (off < f.end) {
      const size_t m = window.find(tok, off);
      if (m == std::string_view::npos) {
        out->push_back({-1, off, f.end});
        break;
      }
      size_t left_end = m;
      if (strip & kStripLeft) {
        while (left_end > off && IsAsciiSpace(text[left_end - 1])) --left_end;
      }
      if (left_end > off) out->push_back({-1, off, left_end});
      out->push_back({id, m, m + tok.size()});
      off = m + tok.size();
      if (strip & kStripRight) {
        while (off < f.end && IsAsciiSpace(text[off])) ++off;
      }
    }
  }
}

}  // namespace tessera::tokenizer_internal
