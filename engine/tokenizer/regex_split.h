// Pre-tokenizer splitting with PCRE2 regexes (UTF-8, Unicode properties,
// JIT-compiled). Private to engine/tokenizer.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::tokenizer_internal {

// One compiled PCRE2 pattern (PCRE2_UTF | PCRE2_UCP: \s, \w, \d and the
// POSIX classes are Unicode-aware, as in Oniguruma, which Hugging Face's
// tokenizers use; the conformance corpus of tokenizer_hf_test holds the two
// to the same pieces). Safe to use from several threads at once: searches
// keep no shared state.
class Regex {
 public:
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the leftmost match in text[from, text.size()); the text outside
  // `text` is invisible to the pattern (no lookahead past its end). Returns
  // false when there is none; sets [*begin, *end) otherwise. `text` must be
  // valid UTF-8 (IsValidUtf8) and `from` on a character boundary.
  bool Search(std::string_view text, size_t from, size_t* begin, size_t* end) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

// Where a match goes relative to the text around it, as Hugging Face's
// `Split` behaviours define it.
enum class SplitBehavior {
  kIsolated,            // match and gaps are separate pieces
  kRemoved,             // gaps only
  kMergedWithPrevious,  // each match ends the piece before it
  kMergedWithNext,      // each match starts the piece after it
  kContiguous,          // consecutive matches form one piece
};

// Splits each piece of `pieces` (views into one text) at the matches of
// `regex`, as llama.cpp's unicode_regex_split applies one of its patterns
// (kIsolated: gaps between matches are pieces too). With `invert`, the gaps
// are treated as the matches. Empty pieces are dropped. Ill-formed UTF-8 is
// searched as if each bad byte were U+FFFD, and the pieces keep the bytes.
void SplitPieces(const Regex& regex, SplitBehavior behavior, bool invert,
                 std::vector<std::string_view>* pieces);

}  // namespace tessera::tokenizer_internal
