// Hugging Face tokenizer.json tokenizers against the ids of Hugging Face's
// JavaScript tokenizers (tests/tokenizer-reference, committed under
// tests/data/tokenizers), and the refusal of malformed or unsupported files.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/gguf.h"
#include "engine/tokenizer/gguf_export.h"
#include "engine/tokenizer/hf_bpe.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/gzip_file.h"

namespace tessera {
namespace {

using Json = nlohmann::json;

std::string DataPath(const std::string& rel) {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/data/" + rel;
}

// NAME's tokenizer_config.json (stored gzipped where it is large).
std::string ReadConfig(const std::string& name) {
  return testing::ReadPlainOrGzip(DataPath("tokenizers/" + name + "/tokenizer_config.json"));
}

// The objects of a gzipped JSON-lines file of tests/data (none when it is absent).
std::vector<Json> ReadJsonLines(const std::string& rel) {
  std::istringstream in(testing::ReadGzip(DataPath(rel)));
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));
  return out;
}

// A variant's NAME/patch.json: its base tokenizer's name ("base") and the
// members of tokenizer.json that replace the base's. Null for a tokenizer
// that is not a variant.
Json ReadPatch(const std::string& name) {
  std::ifstream in(DataPath("tokenizers/" + name + "/patch.json"));
  return in.is_open() ? Json::parse(in) : Json();
}

// The tokenizer whose tokenizer.json, config and corpus NAME uses.
std::string BaseOf(const std::string& name) {
  const Json patch = ReadPatch(name);
  return patch.is_null() ? name : patch["base"].get<std::string>();
}

// The shared corpus, or NAME/corpus.jsonl.gz where a tokenizer (or the base of
// a variant) has its own.
std::vector<std::string> ReadCorpus(const std::string& variant = "") {
  const std::string name = variant.empty() ? variant : BaseOf(variant);
  const std::string own = "tokenizers/" + name + "/corpus.jsonl.gz";
  const bool has_own = !name.empty() && std::filesystem::exists(DataPath(own));
  std::vector<std::string> out;
  for (const Json& j : ReadJsonLines(has_own ? own : "tokenizers/corpus.jsonl.gz")) {
    out.push_back(j.get<std::string>());
  }
  return out;
}

struct Reference {
  std::vector<TokenId> ids, ids_special;
  std::string decoded;
};

std::vector<Reference> ReadReference(const std::string& name) {
  std::vector<Reference> out;
  for (const Json& j : ReadJsonLines("tokenizers/" + name + "/reference.jsonl.gz")) {
    out.push_back({j["ids"].get<std::vector<TokenId>>(), j["ids_special"].get<std::vector<TokenId>>(),
                   j["decoded"].get<std::string>()});
  }
  return out;
}

// NAME's tokenizer.json: a committed file, or a variant's base patched.
std::string TokenizerJson(const std::string& name) {
  const Json patch = ReadPatch(name);
  const std::string base = patch.is_null() ? name : patch["base"].get<std::string>();
  std::string json = testing::ReadGzip(DataPath("tokenizers/" + base + "/tokenizer.json.gz"));
  if (patch.is_null() || json.empty()) return json;
  Json root = Json::parse(json);
  for (const auto& [key, value] : patch.items()) {
    if (key != "base") root[key] = value;
  }
  return root.dump();
}

std::unique_ptr<Tokenizer> LoadHf(const std::string& name) {
  const std::string json = TokenizerJson(name);
  const std::string config = ReadConfig(BaseOf(name));
  EXPECT_FALSE(json.empty()) << name;
  auto tok = Tokenizer::FromHuggingFace(json, config);
  EXPECT_TRUE(tok.ok()) << name << ": " << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

class HfReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReferenceTest, MatchesJavaScriptTokenizersOnCorpus) {
  auto tok = LoadHf(GetParam());
  ASSERT_NE(tok, nullptr);
  const auto corpus = ReadCorpus(GetParam());
  const auto ref = ReadReference(GetParam());
  ASSERT_GE(corpus.size(), BaseOf(GetParam()) == "tiny-spm" ? 400u : 2000u);
  ASSERT_EQ(corpus.size(), ref.size());
  size_t plain = 0, special = 0, decoded = 0, decodable = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto ids = tok->Encode(corpus[i], EncodeOptions{false, /*parse_special=*/true});
    plain += ids == ref[i].ids;
    EXPECT_EQ(ids, ref[i].ids) << GetParam() << " string " << i << ": " << Json(corpus[i]).dump();
    special += tok->Encode(corpus[i], EncodeOptions{tok->add_bos(), true}) == ref[i].ids_special;
    bool has_control = false;
    for (TokenId id : ref[i].ids) has_control = has_control || tok->IsControl(id);
    if (!has_control) {
      ++decodable;
      // Llama 3's config asks for clean_up_tokenization_spaces, which the
      // reference applies to its decoded text; without it the ByteLevel
      // decoder gives the input back exactly.
      const std::string& want = GetParam() == "llama3" ? corpus[i] : ref[i].decoded;
      const std::string got = tok->Decode(ref[i].ids);
      decoded += got == want;
      EXPECT_EQ(got, want) << GetParam() << " decoding string " << i;
    }
  }
  EXPECT_EQ(plain, corpus.size());
  EXPECT_EQ(special, corpus.size());
  EXPECT_EQ(decoded, decodable);
  std::printf("%s: %zu/%zu ids equal, %zu/%zu with special tokens added, %zu/%zu decoded equal\n",
              GetParam().c_str(), plain, corpus.size(), special, corpus.size(), decoded, decodable);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, HfReferenceTest,
                         ::testing::Values("llama3", "qwen3", "gemma3", "tiny-spm", "llama2",
                                           "mistral_nemo", "deepseek_v3", "llama2-metaspace",
                                           "tiny-spm-metaspace-first",
                                           "tiny-spm-metaspace-always",
                                           "tiny-spm-metaspace-decoder"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });


// A long word is encoded in parts split between characters that no merge
// joins, each part once: that must give the ids of merging the whole word
// at once. The corpus, joined into one word as it is and with spaces as
// SentencePiece's U+2581 (how Llama 2's and Gemma 3's normalizers hand
// whole texts to BPE), through each committed BPE model.
TEST(HfBpeTest, LongWordsInPartsGiveTheIdsOfTheWholeWord) {
  const auto corpus = ReadCorpus();
  std::string joined;
  for (size_t i = 0; i < 600 && i < corpus.size(); ++i) joined += corpus[i] + " ";
  std::string spm;
  for (char c : joined) spm += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  for (const char* name : {"llama2", "gemma3", "llama3", "qwen3", "mistral_nemo", "deepseek_v3"}) {
    const Json json = Json::parse(
        testing::ReadGzip(DataPath(std::string("tokenizers/") + name + "/tokenizer.json.gz")));
    auto bpe = tokenizer_internal::HfBpe::Parse(json["model"]);
    ASSERT_TRUE(bpe.ok()) << name << ": " << bpe.status();
    for (const std::string* word : {&joined, &spm}) {
      std::vector<TokenId> parts, whole;
      bpe->Encode(*word, &parts);
      bpe->EncodeWhole(*word, &whole);
      EXPECT_GT(whole.size(), word->size() / 16) << name;
      EXPECT_EQ(parts, whole) << name;
    }
  }
}

TEST(HfTokenizerTest, SpecialIdsFromConfig) {
  auto llama3 = LoadHf("llama3");
  ASSERT_NE(llama3, nullptr);
  EXPECT_EQ(llama3->bos_id(), 128000);
  EXPECT_EQ(llama3->eos_id(), 128001);
  EXPECT_FALSE(llama3->add_bos());  // this tokenizer.json's post-processor adds no BOS
  EXPECT_TRUE(llama3->IsEndOfGeneration(128001));
  EXPECT_TRUE(llama3->IsControl(128009));
  EXPECT_EQ(llama3->TokenText(128009), "<|eot_id|>");
  EXPECT_EQ(llama3->TokenBytes(128009), "");
  // Special-token text is text without parse_special.
  const auto plain = llama3->Encode("<|eot_id|>", EncodeOptions{false, false});
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(llama3->Decode(plain), "<|eot_id|>");
  EXPECT_EQ(llama3->Encode("<|eot_id|>", EncodeOptions{false, true}), std::vector<TokenId>{128009});
  EXPECT_EQ(llama3->Encode("Hi", true).front(), 128000);  // add_bos still prepends BOS
  auto gemma3 = LoadHf("gemma3");
  ASSERT_NE(gemma3, nullptr);
  EXPECT_EQ(gemma3->bos_id(), 2);
  EXPECT_EQ(gemma3->eos_id(), 106);
  EXPECT_TRUE(gemma3->add_bos());
  // Byte fallback: a character outside the vocabulary becomes <0xXX> tokens.
  const auto bytes = gemma3->Encode("\xF0\x9F\xA7\xBF", false);
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(gemma3->Decode(bytes), "\xF0\x9F\xA7\xBF");
}

// The GGUF llama-bpe, gemma-3 and qwen2 vocabularies were made from the same
// tokenizer.json files, so the GGUF path with parse_special must give the
// ids the JavaScript tokenizers give (asked for no BOS: llama.cpp adds one to
// Llama 3 that Hugging Face does not). Returns the strings that differ.
std::vector<size_t> GgufMismatches(const std::string& vocab, const std::string& hf) {
  const std::string path = DataPath("vocab/ggml-vocab-" + vocab + ".gguf");
  auto file = GgufFile::Open(testing::UnpackedPath(path));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  auto gguf = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return {};
  const auto corpus = ReadCorpus();
  const auto ref = ReadReference(hf);
  std::vector<size_t> bad;
  for (size_t i = 0; i < corpus.size(); ++i) {
    if ((*gguf)->Encode(corpus[i], EncodeOptions{false, true}) != ref[i].ids) bad.push_back(i);
  }
  std::printf("GGUF %s vs tokenizer.json %s: %zu/%zu equal\n", vocab.c_str(), hf.c_str(),
              corpus.size() - bad.size(), corpus.size());
  return bad;
}

TEST(HfTokenizerTest, GgufLlamaBpeAgreesWithTokenizerJson) {
  EXPECT_TRUE(GgufMismatches("llama-bpe", "llama3").empty());
}

TEST(HfTokenizerTest, GgufGemma3AgreesWithTokenizerJson) {
  for (size_t i : GgufMismatches("gemma-3", "gemma3")) ADD_FAILURE() << "string " << i;
}

// Long texts take the split paths of both tokenizers (the GGUF SentencePiece
// tokenizer splits before U+2581 where no token joins across it, the
// tokenizer.json BPE between characters that no merge joins, and both
// encode each distinct part once per call): the corpus joined into long
// texts must still give the same ids from both.
TEST(HfTokenizerTest, GgufGemma3AgreesWithTokenizerJsonOnLongTexts) {
  auto file = GgufFile::Open(testing::UnpackedPath(DataPath("vocab/ggml-vocab-gemma-3.gguf")));
  ASSERT_TRUE(file.ok()) << file.status();
  auto gguf = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto hf = LoadHf("gemma3");
  ASSERT_NE(hf, nullptr);
  const auto corpus = ReadCorpus();
  for (const char* sep : {" ", "\n\n", ""}) {
    std::string text;
    for (size_t i = 0; i < 800 && i < corpus.size(); ++i) text += corpus[i] + sep;
    const auto want = hf->Encode(text, EncodeOptions{false, true});
    EXPECT_GT(want.size(), text.size() / 16);
    EXPECT_EQ((*gguf)->Encode(text, EncodeOptions{false, true}), want) << Json(sep).dump();
  }
}

// Where llama.cpp and Hugging Face differ by design (README of tests/data/vocab):
// tokenizer.json applies NFC and llama.cpp does not, and llama.cpp matches
// "</s>" as an end-of-generation control token.
TEST(HfTokenizerTest, GgufQwen2AgreesWithTokenizerJsonBarNfcAndEos) {
  const auto corpus = ReadCorpus();
  for (size_t i : GgufMismatches("qwen2", "qwen3")) {
    const std::string& s = corpus[i];
    const bool explained = s.find("</s>") != std::string::npos || s.find("\xCC") != std::string::npos ||
                           s.find("\xCD") != std::string::npos || s.find("\xE1\x84") != std::string::npos ||
                           s.find("\xE1\x85") != std::string::npos || s.find("\xE1\x86") != std::string::npos;
    EXPECT_TRUE(explained) << "string " << i << ": " << Json(s).dump();
  }
}

// A small valid tokenizer.json to break one piece at a time.
Json TinyTokenizer() {
  return Json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 5, "content": "<s>", "single_word": false, "lstrip": false,
                      "rstrip": false, "normalized": false, "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                      "use_regex": true},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false,
              "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4},
              "merges": ["a b", "\u0120 ab"]}
  })");
}

TEST(HfTokenizerTest, TinyTokenizerWorks) {
  auto tok = Tokenizer::FromHuggingFace(TinyTokenizer().dump(), "");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("ab ab", false), (std::vector<TokenId>{2, 4}));
  EXPECT_EQ((*tok)->Encode("ab", true), (std::vector<TokenId>{5, 2}));
  EXPECT_EQ((*tok)->Encode("<s>ab", EncodeOptions{false, true}), (std::vector<TokenId>{5, 2}));
  EXPECT_EQ((*tok)->Decode(std::vector<TokenId>{5, 2, 4}), "ab ab");
  EXPECT_EQ((*tok)->vocab_size(), 6);
}

TEST(HfTokenizerTest, RejectsMalformedAndUnsupported) {
  struct Case {
    const char* what;
    std::function<void(Json&)> edit;
    absl::StatusCode code;
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  const auto kUnsupported = absl::StatusCode::kUnimplemented;
  const std::vector<Case> cases = {
      {"no model", [](Json& j) { j.erase("model"); }, kBad},
      {"model not an object", [](Json& j) { j["model"] = 3; }, kBad},
      {"unigram model", [](Json& j) { j["model"]["type"] = "Unigram"; }, kUnsupported},
      {"vocab not an object", [](Json& j) { j["model"]["vocab"] = Json::array(); }, kBad},
      {"empty vocab", [](Json& j) { j["model"]["vocab"] = Json::object(); }, kBad},
      {"negative id", [](Json& j) { j["model"]["vocab"]["a"] = -1; }, kBad},
      {"string id", [](Json& j) { j["model"]["vocab"]["a"] = "0"; }, kBad},
      {"huge id", [](Json& j) { j["model"]["vocab"]["a"] = 1ll << 40; }, kBad},
      {"far-off id", [](Json& j) { j["model"]["vocab"]["a"] = 1 << 20; }, kBad},
      {"far-off added id", [](Json& j) { j["added_tokens"][0]["id"] = 1 << 20; }, kBad},
      {"duplicate id", [](Json& j) { j["model"]["vocab"]["b"] = 0; }, kBad},
      {"merges not an array", [](Json& j) { j["model"]["merges"] = "a b"; }, kBad},
      {"merge without space", [](Json& j) { j["model"]["merges"][0] = "ab"; }, kBad},
      {"merge of unknown token", [](Json& j) { j["model"]["merges"][0] = "a z"; }, kBad},
      {"merge result not in vocab", [](Json& j) { j["model"]["vocab"].erase("ab"); }, kBad},
      {"merge pair of numbers", [](Json& j) { j["model"]["merges"][0] = Json::array({1, 2}); }, kBad},
      {"dropout", [](Json& j) { j["model"]["dropout"] = 0.1; }, kUnsupported},
      {"subword prefix", [](Json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, kUnsupported},
      {"unk not in vocab", [](Json& j) { j["model"]["unk_token"] = "<unk>"; }, kBad},
      {"byte_fallback not bool", [](Json& j) { j["model"]["byte_fallback"] = "yes"; }, kBad},
      {"unknown normalizer", [](Json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, kUnsupported},
      {"normalizer without type", [](Json& j) { j["normalizer"] = Json::object(); }, kBad},
      {"bad regex", [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(["}}},
                               {"behavior", "Isolated"}, {"invert", false}};
       }, kBad},
      {"bad split behavior", [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}},
                               {"behavior", "Sideways"}, {"invert", false}};
       }, kUnsupported},
      {"pattern not an object", [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", " "}, {"behavior", "Isolated"}};
       }, kBad},
      {"metaspace without replacement", [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}};
       }, kBad},
      {"metaspace replacement of two characters", [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}};
       }, kBad},
      {"metaspace unknown prepend scheme", [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"},
                               {"prepend_scheme", "sometimes"}};
       }, kBad},
      {"metaspace add_prefix_space contradicts scheme", [](Json& j) {
         j["decoder"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "first"},
                         {"add_prefix_space", false}};
       }, kBad},
      {"metaspace split not bool", [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"split", "yes"}};
       }, kBad},
      {"sequence not an array", [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", 1}};
       }, kBad},
      {"unknown decoder", [](Json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, kUnsupported},
      {"added tokens not an array", [](Json& j) { j["added_tokens"] = Json::object(); }, kBad},
      {"added token without id", [](Json& j) { j["added_tokens"][0].erase("id"); }, kBad},
      {"added token empty", [](Json& j) { j["added_tokens"][0]["content"] = ""; }, kBad},
      {"added token lstrip not bool", [](Json& j) { j["added_tokens"][0]["lstrip"] = 1; }, kBad},
      {"template id out of range", [](Json& j) {
         j["post_processor"]["special_tokens"]["<s>"]["ids"][0] = 99;
       }, kBad},
      {"template names a missing token", [](Json& j) {
         j["post_processor"]["special_tokens"].erase("<s>");
       }, kBad},
      {"bert post-processor", [](Json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }, kUnsupported},
      {"truncation", [](Json& j) { j["truncation"] = {{"max_length", 8}}; }, kUnsupported},
      {"not an object", [](Json& j) { j = Json::array({1, 2}); }, kBad},
  };
  for (const Case& c : cases) {
    Json j = TinyTokenizer();
    c.edit(j);
    auto tok = Tokenizer::FromHuggingFace(j.dump(), "");
    EXPECT_FALSE(tok.ok()) << c.what;
    if (!tok.ok()) {
      EXPECT_EQ(tok.status().code(), c.code) << c.what << ": " << tok.status();
    }
  }
  for (const char* text : {"", "{", "[1,", "{\"model\": }", "\xFF\xFE"}) {
    EXPECT_FALSE(Tokenizer::FromHuggingFace(text, "").ok()) << text;
  }
  const std::string good = TinyTokenizer().dump();
  EXPECT_FALSE(Tokenizer::FromHuggingFace(good, "{").ok());
  EXPECT_FALSE(Tokenizer::FromHuggingFace(good, "[]").ok());
  EXPECT_FALSE(Tokenizer::FromHuggingFace(good, R"({"bos_token": 7})").ok());
  EXPECT_FALSE(Tokenizer::FromHuggingFace(good, R"({"eos_token": "<missing>"})").ok());
  auto ok = Tokenizer::FromHuggingFace(good, R"({"bos_token": {"content": "<s>"}, "eos_token": "b"})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->bos_id(), 5);
  EXPECT_EQ((*ok)->eos_id(), 1);
}

// single_word, which the JavaScript reference does not implement, by the
// crate's rule: the token must not touch a word character on either side.
TEST(HfTokenizerTest, SingleWordAddedToken) {
  Json j = TinyTokenizer();
  j["added_tokens"].push_back({{"id", 6}, {"content", "ab"}, {"single_word", true}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", false}});
  auto tok = Tokenizer::FromHuggingFace(j.dump(), "");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto contains6 = [&](const char* text) {
    const auto ids = (*tok)->Encode(text, false);
    return std::find(ids.begin(), ids.end(), 6) != ids.end();
  };
  EXPECT_TRUE(contains6("ab"));
  EXPECT_TRUE(contains6("b ab."));
  EXPECT_FALSE(contains6("aab"));
  EXPECT_FALSE(contains6("ab_"));
  EXPECT_FALSE(contains6("\xC3\xA9" "ab"));  // a letter outside ASCII is a word character too
}

// --- tokenizer.json as GGUF keys (HfTokenizerToGguf) ---

std::unique_ptr<Tokenizer> GgufTokenizerOf(const GgufTokenizerKeys& keys) {
  GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  keys.WriteTo(writer);
  auto file = GgufFile::FromBytes(writer.Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

class GgufExportTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// The GGUF tokenizer written from a byte-level tokenizer.json gives the
// reference ids on the whole corpus, and keeps the special ids.
TEST_P(GgufExportTest, GgufKeysReproduceTheReferenceIds) {
  const auto& [name, want_pre] = GetParam();
  const std::string json = testing::ReadGzip(DataPath("tokenizers/" + name + "/tokenizer.json.gz"));
  const std::string config = ReadConfig(name);
  const int32_t generation_eos[] = {7, 9};
  auto keys = HfTokenizerToGguf(json, config, generation_eos);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->model, "gpt2");
  EXPECT_EQ(keys->pre, want_pre);
  EXPECT_GT(keys->merges.size(), 100000u);
  auto hf = LoadHf(name);
  auto gguf = GgufTokenizerOf(*keys);
  // GGUF carries no normalizer: the GGUF tokenizer is held to the
  // reference's ids where Qwen's NFC leaves the text unchanged, and to
  // tokenizer.json's without its normalizer everywhere.
  EXPECT_EQ(keys->dropped_normalizer, name == "qwen3" ? "NFC" : "");
  Json plain_json = Json::parse(json);
  plain_json["normalizer"] = nullptr;
  auto plain = Tokenizer::FromHuggingFace(plain_json.dump(), config);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_NE(hf, nullptr);
  ASSERT_NE(gguf, nullptr);
  EXPECT_EQ(gguf->vocab_size(), hf->vocab_size());
  if (hf->bos_id() >= 0) {
    EXPECT_EQ(gguf->bos_id(), hf->bos_id());
  }
  EXPECT_EQ(gguf->eos_id(), hf->eos_id());
  EXPECT_EQ(gguf->add_bos(), hf->add_bos());
  EXPECT_NE(keys->eos, 7);  // tokenizer_config.json names it
  EXPECT_TRUE(gguf->IsEndOfGeneration(hf->eos_id()));
  // A GGUF reader (llama.cpp, and Tessera as it) makes ordinary vocabulary
  // entries that read like end-of-turn tokens, such as Qwen's "</s>",
  // control tokens matched in the text; strings holding one are skipped.
  std::vector<std::string> promoted;
  for (TokenId id = 0; id < gguf->vocab_size(); ++id) {
    if (gguf->IsControl(id) && keys->token_types[id] == 1) promoted.push_back(gguf->TokenText(id));
  }
  const auto corpus = ReadCorpus(name);
  const auto ref = ReadReference(name);
  ASSERT_EQ(corpus.size(), ref.size());
  size_t equal = 0, skipped = 0, normalized = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    if (std::any_of(promoted.begin(), promoted.end(), [&](const std::string& t) {
          return corpus[i].find(t) != std::string::npos;
        })) {
      ++skipped;
      continue;
    }
    const EncodeOptions options{false, /*parse_special=*/true};
    const auto ids = gguf->Encode(corpus[i], options);
    const auto want = (*plain)->Encode(corpus[i], options);
    EXPECT_EQ(ids, want) << name << " string " << i << ": " << Json(corpus[i]).dump();
    if (want == ref[i].ids) {
      equal += ids == ref[i].ids;
    } else {
      ++normalized;  // the normalizer changed the text
    }
    if (::testing::Test::HasFailure() && i > 20) break;
  }
  EXPECT_LT(skipped, corpus.size() / 50);
  EXPECT_EQ(equal + skipped + normalized, corpus.size());
  if (name == "llama3") {
    EXPECT_EQ(normalized, 0u);
  }
  std::printf("%s: %zu strings equal to the reference, %zu changed by its normalizer, %zu with "
              "promoted tokens\n", name.c_str(), equal, normalized, skipped);
}

INSTANTIATE_TEST_SUITE_P(ByteLevel, GgufExportTest,
                         ::testing::Values(std::make_pair("llama3", "llama-bpe"),
                                           std::make_pair("qwen3", "qwen2"),
                                           std::make_pair("mistral_nemo", "tekken"),
                                           std::make_pair("deepseek_v3", "deepseek-v3")),
                         [](const auto& info) { return info.param.first; });

// SentencePiece-style files become "llama" keys: the GGUF tokenizer gives
// the reference ids on the whole corpus. Llama 2 in its Metaspace form gives
// the ids of its legacy form, the one GGUF can say, and says so (inexact).
class GgufExportSpmTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufExportSpmTest, GgufKeysReproduceTheReferenceIds) {
  const std::string name = BaseOf(GetParam());
  const std::string config = ReadConfig(name);
  auto keys = HfTokenizerToGguf(TokenizerJson(GetParam()), config, {});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->model, "llama");
  // Llama 2's normalizer prepends U+2581 (GGUF add_space_prefix); Gemma's
  // does not.
  EXPECT_EQ(keys->add_space_prefix, name == "llama2");
  EXPECT_TRUE(keys->dropped_normalizer.empty());
  EXPECT_EQ(keys->inexact.empty(), name == GetParam()) << keys->inexact;
  auto hf = LoadHf(name);
  auto gguf = GgufTokenizerOf(*keys);
  ASSERT_NE(hf, nullptr);
  ASSERT_NE(gguf, nullptr);
  EXPECT_EQ(gguf->bos_id(), hf->bos_id());
  EXPECT_EQ(gguf->eos_id(), hf->eos_id());
  EXPECT_EQ(gguf->add_bos(), hf->add_bos());
  const auto corpus = ReadCorpus(name);
  const auto ref = ReadReference(name);
  ASSERT_EQ(corpus.size(), ref.size());
  size_t equal = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto ids = gguf->Encode(corpus[i], EncodeOptions{false, /*parse_special=*/true});
    equal += ids == ref[i].ids;
    EXPECT_EQ(ids, ref[i].ids) << name << " string " << i << ": " << Json(corpus[i]).dump();
    if (::testing::Test::HasFailure() && i > 20) break;
  }
  EXPECT_EQ(equal, corpus.size());
}

INSTANTIATE_TEST_SUITE_P(SentencePiece, GgufExportSpmTest,
                         ::testing::Values("gemma3", "llama2", "llama2-metaspace"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// tiny-spm's added tokens strip the spaces around them (lstrip, rstrip),
// which no GGUF key says: the check text shows it and the file is refused.
TEST(GgufExport, KeysThatDoNotReproduceTheIdsAreRefused) {
  const std::string json = testing::ReadGzip(DataPath("tokenizers/tiny-spm/tokenizer.json.gz"));
  const std::string config = ReadConfig("tiny-spm");
  auto keys = HfTokenizerToGguf(json, config, {});
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kFailedPrecondition) << keys.status();
}

TEST(GgufExport, MalformedTokenizerJsonIsRefused) {
  const std::string ok_model =
      R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  const std::string byte_level = R"("pre_tokenizer": {"type": "ByteLevel",
      "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
  auto convert = [](const std::string& json) { return HfTokenizerToGguf(json, "", {}); };
  auto ok = convert("{" + ok_model + ", " + byte_level + "}");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tokens, (std::vector<std::string>{"a", "b", "ab"}));
  EXPECT_EQ(ok->merges, (std::vector<std::string>{"a b"}));
  EXPECT_EQ(ok->eos, -1);
  const int32_t generation_eos[] = {1};
  auto with_eos = HfTokenizerToGguf("{" + ok_model + ", " + byte_level + "}", "", generation_eos);
  ASSERT_TRUE(with_eos.ok()) << with_eos.status();
  EXPECT_EQ(with_eos->eos, 1);  // no eos_token in a config: generation_config.json's
  // A gap in the ids becomes an unused "[PAD<id>]" entry.
  auto gap = convert(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []}, )" +
                     byte_level + "}");
  ASSERT_TRUE(gap.ok()) << gap.status();
  EXPECT_EQ(gap->tokens[1], "[PAD1]");
  EXPECT_EQ(gap->token_types[1], 5);
  EXPECT_FALSE(convert("[]").ok());
  // Neither byte-level nor SentencePiece-style (no byte fallback):
  EXPECT_EQ(convert("{" + ok_model + "}").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(convert(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}, )" +
                       byte_level + "}").ok());
}

}  // namespace
}  // namespace tessera
