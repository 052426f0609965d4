// The normalizer, pre-tokenizer and decoder of a tokenizer.json. Private to
// engine/tokenizer.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/hf_json.h"
#include "engine/tokenizer/regex_split.h"

namespace tessera::tokenizer_internal {

class HfNormalizer {
 public:
  // `spec` may be null (no normalizer).
  static absl::StatusOr<HfNormalizer> Parse(const Json* spec);
  std::string Apply(std::string_view text) const;
  bool empty() const { return steps_.empty(); }

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kReplace, kPrepend };
  struct Step {
    Kind kind;
    std::string pattern;                 // kReplace with a String pattern
    std::shared_ptr<const Regex> regex;  // kReplace with a Regex pattern
    std::string content;                 // the replacement, or the prefix
  };
  static absl::Status ParseOne(const Json& spec, std::string_view where, std::vector<Step>* steps);
  std::vector<Step> steps_;
};

class HfPreTokenizer {
 public:
  static absl::StatusOr<HfPreTokenizer> Parse(const Json* spec);
  // Splits normalized text into the words the model encodes one by one:
  // views into `text`, or into `storage` for words that gained a prefix space.
  void Split(std::string_view text, std::vector<std::string_view>* words,
             std::deque<std::string>* storage) const;
  // True when the words are to be mapped to GPT-2's byte alphabet.
  bool byte_level() const { return byte_level_; }

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
  };
  static absl::Status ParseOne(const Json& spec, std::string_view where, HfPreTokenizer* out);
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

class HfDecoder {
 public:
  static absl::StatusOr<HfDecoder> Parse(const Json* spec);
  // The bytes one token contributes to the decoded text.
  std::string TokenBytes(std::string_view token) const;
  // True when the decoder strips one leading space from the whole text
  // (Fuse followed by Strip(" ", 1, 0)).
  bool strips_leading_space() const { return strip_leading_space_; }

 private:
  enum class Kind { kByteLevel, kReplace, kByteFallback, kStrip };
  struct Step {
    Kind kind;
    std::string pattern, content;
    int start = 0, stop = 0;
  };
  static absl::Status ParseOne(const Json& spec, std::string_view where, bool* fused,
                               HfDecoder* out);
  std::vector<Step> steps_;
  bool strip_leading_space_ = false;
};

// GPT-2's byte alphabet: the UTF-8 text of each byte's stand-in, and back.
const std::string& ByteLevelChar(uint8_t byte);
// The byte a stand-in codepoint stands for, or -1.
int ByteLevelByte(char32_t cp);

}  // namespace tessera::tokenizer_internal
