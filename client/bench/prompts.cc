#include "client/bench/prompts.h"

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera::bench {

absl::StatusOr<std::vector<std::string>> ParseDataset(std::string_view content) {
  std::vector<std::string> prompts;
  int line_number = 0;
  // This abseil's string_view is its own type, not std::string_view.
  const absl::string_view text(content.data(), content.size());
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const nlohmann::json row =
        nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": not valid JSON"));
    }
    if (!row.is_object() || !row.contains("prompt") || !row["prompt"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": want an object with a string \"prompt\""));
    }
    std::string prompt = row["prompt"].get<std::string>();
    if (prompt.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": empty prompt"));
    }
    prompts.push_back(std::move(prompt));
  }
  if (prompts.empty()) return absl::InvalidArgumentError("the dataset has no prompts");
  return prompts;
}

absl::StatusOr<std::vector<std::string>> LoadDataset(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open dataset ", path));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read dataset ", path));
  absl::StatusOr<std::vector<std::string>> prompts = ParseDataset(content.str());
  if (!prompts.ok()) {
    return absl::Status(prompts.status().code(),
                        absl::StrCat(path, ": ", prompts.status().message()));
  }
  return prompts;
}

std::vector<int32_t> RandomPromptIds(uint64_t seed, int64_t index, int length,
                                     int32_t vocab_size) {
  // Seeding from (seed, index) makes each prompt independent of which other
  // prompts were drawn, so warmup and concurrency do not change them.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32)};
  std::mt19937 rng(seq);
  std::uniform_int_distribution<int32_t> id(kMinRandomTokenId, vocab_size - 1);
  std::vector<int32_t> ids(static_cast<size_t>(length));
  for (int32_t& value : ids) value = id(rng);
  return ids;
}

PromptSource PromptSource::FromDataset(std::vector<std::string> prompts) {
  PromptSource source;
  source.dataset_ = std::move(prompts);
  return source;
}

PromptSource PromptSource::Random(int length, int32_t vocab_size, uint64_t seed) {
  PromptSource source;
  source.length_ = length;
  source.vocab_size_ = vocab_size;
  source.seed_ = seed;
  return source;
}

Prompt PromptSource::Get(int64_t index) const {
  Prompt prompt;
  if (!dataset_.empty()) {
    prompt.text = dataset_[static_cast<size_t>(index) % dataset_.size()];
  } else {
    prompt.token_ids = RandomPromptIds(seed_, index, length_, vocab_size_);
  }
  return prompt;
}

}  // namespace tessera::bench
