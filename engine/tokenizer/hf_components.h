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

// Metaspace's prepend_scheme: put the replacement in front of every word,
// of the input's first word only, or never.
enum class MetaspacePrepend { kAlways, kFirst, kNever };

// A Metaspace pre-tokenizer or decoder: {"replacement", "prepend_scheme",
// "split", or the older "add_prefix_space"}.
struct MetaspaceSpec {
  std::string replacement;  // one character, UTF-8
  MetaspacePrepend prepend = MetaspacePrepend::kAlways;
  bool split = true;
};
absl::StatusOr<MetaspaceSpec> ParseMetaspace(const Json& spec, std::string_view where);

class HfPreTokenizer {
 public:
  static absl::StatusOr<HfPreTokenizer> Parse(const Json* spec);
  // Splits normalized text into the words the model encodes one by one:
  // views into `text`, or into `storage` for words a step rewrote (a prefix
  // space, Metaspace's U+2581). `at_start`: `text` begins the input, for
  // Metaspace's prepend_scheme "first".
  void Split(std::string_view text, bool at_start, std::vector<std::string_view>* words,
             std::deque<std::string>* storage) const;
  // True when the words are to be mapped to GPT-2's byte alphabet.
  bool byte_level() const { return byte_level_; }

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    // Metaspace: spaces become `metaspace` (empty: not a Metaspace step),
    // which is put in front of a word per `prepend`.
    std::string metaspace;
    MetaspacePrepend prepend = MetaspacePrepend::kAlways;
  };
  static absl::Status ParseOne(const Json& spec, std::string_view where, HfPreTokenizer* out);
  static void MetaspaceWords(const Step& step, std::string_view text, bool at_start,
                             std::vector<std::string_view>* words,
                             std::deque<std::string>* storage);
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

class HfDecoder {
 public:
  static absl::StatusOr<HfDecoder> Parse(const Json* spec);
  // The bytes one token contributes to the decoded text.
  std::string TokenBytes(std::string_view token) const;
  // True when the decoder strips one leading space from the whole text
  // (Fuse followed by Strip(" ", 1, 0), or Metaspace unless its
  // prepend_scheme is "never").
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
  bool after_strip_ = false;  // a Strip step was parsed: nothing may follow
};

// GPT-2's byte alphabet: the UTF-8 text of each byte's stand-in, and back.
const std::string& ByteLevelChar(uint8_t byte);
// The byte a stand-in codepoint stands for, or -1.
int ByteLevelByte(char32_t cp);

}  // namespace tessera::tokenizer_internal
