// tokenizer.json's Metaspace pre-tokenizer and decoder in the forms that
// tests/data/tokenizers has no reference ids for (@huggingface/tokenizers
// does not split at the replacement): expectations follow the Rust crate's
// Metaspace, which splits before each replacement (MergedWithNext).

#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/gzip_file.h"

namespace tessera {
namespace {

using Json = nlohmann::json;

const char* const kSpace = "\xE2\x96\x81";  // U+2581

// tests/data/tokenizers/tiny-spm with `pre_tokenizer` (and no normalizer)
// and, when given, `decoder`.
std::unique_ptr<Tokenizer> TinyWith(const Json& pre_tokenizer, const Json& decoder = Json()) {
  Json root = Json::parse(testing::ReadGzip(std::string(TESSERA_SOURCE_DIR) +
                                            "/tests/data/tokenizers/tiny-spm/tokenizer.json.gz"));
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = pre_tokenizer;
  if (!decoder.is_null()) root["decoder"] = decoder;
  auto tok = Tokenizer::FromHuggingFace(root.dump(), "");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

// The ids of tiny-spm's vocabulary entries, "_" standing for U+2581.
std::vector<TokenId> Ids(const Tokenizer& tok, const std::vector<std::string>& pieces) {
  std::vector<TokenId> out;
  for (std::string piece : pieces) {
    for (size_t pos; (pos = piece.find('_')) != std::string::npos;) piece.replace(pos, 1, kSpace);
    TokenId id = -1;
    for (TokenId i = 0; i < tok.vocab_size(); ++i) {
      if (tok.TokenText(i) == piece) id = i;
    }
    EXPECT_GE(id, 0) << piece;
    out.push_back(id);
  }
  return out;
}

Json Metaspace(const char* scheme, bool split) {
  return {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", scheme},
          {"split", split}};
}

// "a  b" is "_a__b". Whole, BPE merges the two spaces ("_" "_" is a merge);
// split before each replacement, the words are "_a", "_" and "_b", and no
// merge crosses a word.
TEST(MetaspaceTest, SplitKeepsMergesInsideWords) {
  auto whole = TinyWith(Metaspace("always", false));
  auto split = TinyWith(Metaspace("always", true));
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(whole->Encode("a  b", false), Ids(*whole, {"_a", "__", "b"}));
  EXPECT_EQ(split->Encode("a  b", false), Ids(*split, {"_a", "_", "_", "b"}));
  // The replacement starts each word, so "_the" still merges.
  EXPECT_EQ(split->Encode("the world", false), Ids(*split, {"_the", "_world"}));
}

// Files from before prepend_scheme: add_prefix_space true is "always" and
// split defaults to true; false is "never".
TEST(MetaspaceTest, OlderFieldsReadAsTheCrateReadsThem) {
  auto always = TinyWith({{"type", "Metaspace"}, {"replacement", kSpace},
                          {"add_prefix_space", true}});
  auto never = TinyWith({{"type", "Metaspace"}, {"replacement", kSpace},
                         {"add_prefix_space", false}});
  ASSERT_NE(always, nullptr);
  ASSERT_NE(never, nullptr);
  EXPECT_EQ(always->Encode("a  b", false), Ids(*always, {"_a", "_", "_", "b"}));
  EXPECT_EQ(never->Encode("a  b", false), Ids(*never, {"a", "_", "_", "b"}));
}

// "first" prepends to the start of the input only: not after an added
// token, and not to a text that already starts with a space.
TEST(MetaspaceTest, FirstPrependsAtTheStartOnly) {
  auto tok = TinyWith(Metaspace("first", false));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("is", false), Ids(*tok, {"_is"}));
  EXPECT_EQ(tok->Encode(" is", false), Ids(*tok, {"_is"}));
  EXPECT_EQ(tok->Encode("is</s>is", EncodeOptions{false, true}), Ids(*tok, {"_is", "</s>", "is"}));
}

// The decoder: U+2581 is a space, and one leading space goes unless the
// scheme is "never".
TEST(MetaspaceTest, DecoderDropsTheLeadingSpaceUnlessNever) {
  const Json pre = Metaspace("first", false);
  for (const char* scheme : {"always", "first", "never"}) {
    auto tok = TinyWith(pre, Metaspace(scheme, true));
    ASSERT_NE(tok, nullptr);
    const std::string want = std::string(scheme) == "never" ? " the world" : "the world";
    EXPECT_EQ(tok->Decode(Ids(*tok, {"_the", "_world"})), want) << scheme;
  }
}

}  // namespace
}  // namespace tessera
