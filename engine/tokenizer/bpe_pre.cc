// llama.cpp's pre-tokenizer patterns (src/llama-vocab.cpp, llm_tokenizer_bpe),
// written for PCRE2. llama.cpp applies each pattern of a list to every
// piece left by the previous one, keeping the text between matches as pieces
// too; regex_split.h does the same.

#include "engine/tokenizer/bpe_pre.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/vocab.h"

namespace tessera::tokenizer_internal {
namespace {

// GPT-2's pattern. llama.cpp's own matcher for it also takes a whitespace run
// that `\s+(?!\S)` leaves; as a gap between matches it is a piece all the same.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3's pattern with the case-insensitive contractions spelled out.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's letter class, as llama.cpp lists it (escaped: several of
// its characters are not in NFC, and normalizing them would break ranges).
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
    "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
    "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
    "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59"
    "\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
    "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
    "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee"
    "\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e"
    "\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f"
    "\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
    "\U000118a0-\U000118df\U0001e900-\U0001e943]+";

constexpr const char* kCjk = "[一-龥ࠀ-一가-퟿]+";

// DeepSeek V3's third pattern (its tokenizer.json and llama.cpp agree).
constexpr const char* kDeepseekV3 =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|)"
    R"( ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Mistral's Tekken pattern as its tokenizer.json writes it. llama.cpp's
// matcher has no \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo} or \p{M}, so it runs
// a rewrite in which a "lower-case" letter is one of a-z and every other
// letter counts as upper case: it splits words with non-ASCII lower-case
// letters ("naïve", "Привет") where the model's own tokenizer does not.
// PCRE2 has the classes, so this takes the model's pattern.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

BpePreTokenizer Make(std::string type, std::vector<std::string> patterns, bool ignore_merges = false,
                     bool add_bos = false) {
  return {std::move(type), std::move(patterns), ignore_merges, add_bos};
}

bool OneOf(std::string_view s, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    if (s == n) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<BpePreTokenizer> GgufBpePreTokenizer(std::string_view pre) {
  if (pre.empty() || pre == "default") {
    return Make("default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"});
  }
  if (OneOf(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                  "lfm2"})) {
    return Make("llama3", {kLlama3}, /*ignore_merges=*/true, /*add_bos=*/true);
  }
  if (OneOf(pre, {"dbrx", "smaug-bpe"})) return Make(std::string(pre), {kLlama3});
  if (OneOf(pre, {"glm4", "chatglm-bpe"})) return Make("chatglm4", {kLlama3});
  if (pre == "deepseek-llm") {
    return Make("deepseek_llm", {"[\r\n]", kDeepseekLetters,
                                 "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
                                 // llama.cpp's "\s+$": the end of the piece.
                                 R"(\s+\z)", kCjk, R"(\p{N}+)"});
  }
  if (pre == "deepseek-v3") {
    return Make("deepseek3_llm", {R"(\p{N}{1,3})", "[一-龥぀-ゟ゠-ヿ]+", kDeepseekV3});
  }
  if (pre == "tekken") {
    return Make("tekken", {kTekken}, /*ignore_merges=*/true, /*add_bos=*/true);
  }
  if (pre == "deepseek-coder") {
    return Make("deepseek_coder", {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"});
  }
  if (pre == "falcon") {
    return Make("falcon", {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"});
  }
  if (OneOf(pre, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                  "minerva-7b"})) {
    return Make(std::string(pre), {R"(\p{N})", kGpt2});
  }
  if (OneOf(pre, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
                  "a.x-4.0", "mellum", "mpt", "olmo", "jais", "exaone4", "trillion",
                  "granite-docling"})) {
    return Make(pre == "mpt" ? "mpt" : "gpt2", {kGpt2});
  }
  if (OneOf(pre, {"qwen2", "deepseek-r1-qwen", "kormo", "stablelm2", "hunyuan", "megrez",
                  "solar-open"})) {
    return Make("qwen2", {kQwen2});
  }
  if (OneOf(pre, {"poro-chat", "bloom", "gpt3-finnish"})) {
    return Make("bloom", {" ?[^(\\s|.,!?…。，、।۔،)]+"});
  }
  if (pre == "viking") {
    return Make("viking",
                {" ?[^(\\s|.,!?…。，、।۔،)]+", R"(\p{N})"});
  }
  return absl::UnimplementedError(
      absl::StrCat("unsupported tokenizer.ggml.pre \"", AsAbsl(pre), "\""));
}

}  // namespace tessera::tokenizer_internal
