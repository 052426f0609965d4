// Tokenizer factory, whole-sequence decoding and streaming detokenization.

#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/model/gguf.h"
#include "engine/tokenizer/hf_tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace tessera {

using tokenizer_internal::AppendSanitizedUtf8;
using tokenizer_internal::kReplacementChar;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  auto vocab = tokenizer_internal::ReadVocab(file);
  if (!vocab.ok()) return vocab.status();
  if (vocab->model == "llama") return tokenizer_internal::MakeLlamaTokenizer(*std::move(vocab));
  return tokenizer_internal::MakeGpt2Tokenizer(*std::move(vocab));
}

std::string Tokenizer::Decode(std::span<const TokenId> ids, bool strip_leading_space) const {
  std::string bytes;
  for (TokenId id : ids) bytes += TokenBytes(id);
  std::string_view view = bytes;
  // SentencePiece removes the space it added in front of the text.
  if (strip_leading_space && add_space_prefix_ && !view.empty() && view.front() == ' ') {
    view.remove_prefix(1);
  }
  std::string text;
  text.reserve(view.size());
  const size_t done = AppendSanitizedUtf8(view, &text);
  // A character cut off at the end can never complete.
  if (done < view.size()) text.append(kReplacementChar);
  return text;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHuggingFace(
    std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  return tokenizer_internal::MakeHfTokenizer(tokenizer_json, tokenizer_config_json);
}

bool Tokenizer::IsEndOfGeneration(TokenId id) const {
  if (id < 0) return false;
  return id == eos_id_ || id == eot_id_ || id == eom_id_ ||
         std::binary_search(extra_eog_ids_.begin(), extra_eog_ids_.end(), id);
}

void Tokenizer::AddEndOfGenerationIds(std::span<const TokenId> ids) {
  for (TokenId id : ids) {
    if (id >= 0 && id < vocab_size_) extra_eog_ids_.push_back(id);
  }
  std::sort(extra_eog_ids_.begin(), extra_eog_ids_.end());
  extra_eog_ids_.erase(std::unique(extra_eog_ids_.begin(), extra_eog_ids_.end()),
                       extra_eog_ids_.end());
}

std::vector<TokenId> Tokenizer::EndOfGenerationIds() const {
  std::vector<TokenId> ids = extra_eog_ids_;
  for (TokenId id : {eos_id_, eot_id_, eom_id_}) {
    if (id >= 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool strip_leading_space)
    : tokenizer_(tokenizer), strip_leading_space_(strip_leading_space) {}

std::string IncrementalDetokenizer::Push(TokenId id) {
  std::string bytes = tokenizer_.TokenBytes(id);
  if (bytes.empty()) return "";
  if (at_start_) {
    at_start_ = false;
    if (strip_leading_space_ && tokenizer_.add_space_prefix() && bytes.front() == ' ') {
      bytes.erase(0, 1);
    }
  }
  pending_ += bytes;
  std::string text;
  const size_t done = AppendSanitizedUtf8(pending_, &text);
  pending_.erase(0, done);
  return text;
}

std::string IncrementalDetokenizer::Flush() {
  if (pending_.empty()) return "";
  // What is held back is always one incomplete character.
  pending_.clear();
  return std::string(kReplacementChar);
}

}  // namespace tessera
