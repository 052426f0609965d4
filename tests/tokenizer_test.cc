#include "engine/tokenizer/tokenizer.h"

#include <cctype>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/gguf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/gzip_file.h"

namespace tessera {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The vocabulary's path and the prefix of its vectors' (.inp, .out); most
// vocabularies are stored gzipped (LoadTokenizer unpacks them).
std::string VocabPath(const std::string& name) {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/data/vocab/ggml-vocab-" + name + ".gguf";
}

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path) {
  auto file = GgufFile::Open(testing::UnpackedPath(path));
  EXPECT_TRUE(file.ok()) << path << ": " << file.status();
  if (!file.ok()) return nullptr;
  auto tokenizer = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tokenizer.ok()) << path << ": " << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// The .inp file is the concatenation of string + "\n__ggml_vocab_test__\n".
std::vector<std::string> ReadTestStrings(const std::string& path) {
  const std::string data = ReadBytes(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t end = data.find(sep, pos);
    if (end == std::string::npos) break;
    out.push_back(data.substr(pos, end - pos));
    pos = end + sep.size();
  }
  return out;
}

// The .out file has one line of space-separated ids per test string.
std::vector<std::vector<TokenId>> ReadTestIds(const std::string& path) {
  std::istringstream in(ReadBytes(path));
  std::vector<std::vector<TokenId>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<TokenId> ids;
    TokenId id;
    while (fields >> id) ids.push_back(id);
    out.push_back(ids);
  }
  return out;
}

class ConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceTest, EncodesAllReferenceVectors) {
  const std::string path = VocabPath(GetParam());
  auto tokenizer = LoadTokenizer(path);
  ASSERT_NE(tokenizer, nullptr);
  const auto strings = ReadTestStrings(path + ".inp");
  const auto expected = ReadTestIds(path + ".out");
  ASSERT_EQ(strings.size(), 46u);
  ASSERT_EQ(expected.size(), 46u);
  for (size_t i = 0; i < strings.size(); ++i) {
    EXPECT_EQ(tokenizer->Encode(strings[i], /*add_bos=*/false), expected[i])
        << "string " << i << ": \"" << strings[i] << "\"";
  }
}

// Encoding never loses information: llama keeps every space (the prefix
// space it adds is stripped again by Decode) and has byte fallback; gpt2 is
// byte-level. So Decode(Encode(s)) == s for every string, including ones
// that start with spaces or are only whitespace.
TEST_P(ConformanceTest, DecodeInvertsEncode) {
  const std::string path = VocabPath(GetParam());
  auto tokenizer = LoadTokenizer(path);
  ASSERT_NE(tokenizer, nullptr);
  for (const std::string& s : ReadTestStrings(path + ".inp")) {
    const std::vector<TokenId> ids = tokenizer->Encode(s, /*add_bos=*/true);
    EXPECT_EQ(tokenizer->Decode(ids), s);
    // Without stripping, llama shows the space it prefixed to non-empty text.
    const bool prefixed = tokenizer->add_space_prefix() && !s.empty();
    EXPECT_EQ(tokenizer->Decode(ids, /*strip_leading_space=*/false), (prefixed ? " " : "") + s);
  }
}

// Every vocabulary with llama.cpp's vectors (tests/data/vocab/README.md).
INSTANTIATE_TEST_SUITE_P(Vocabs, ConformanceTest,
                         ::testing::Values("gpt-2", "llama-spm", "phi-3", "llama-bpe", "qwen2",
                                           "deepseek-llm", "deepseek-coder", "falcon", "starcoder",
                                           "refact", "mpt"),
                         [](const auto& param_info) {
                           std::string name;
                           for (char c : param_info.param) {
                             if (std::isalnum(static_cast<unsigned char>(c))) name += c;
                           }
                           return name;
                         });

// Special-token text with and without parse_special, against llama.cpp
// (tests/scripts/make_gguf_special_reference.py wrote tests/data/vocab/special.jsonl).
TEST(TokenizerTest, SpecialTokensMatchLlamaCpp) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/data/vocab/special.jsonl");
  std::string line;
  size_t checked = 0;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    auto tok = LoadTokenizer(VocabPath(j["vocab"].get<std::string>()));
    ASSERT_NE(tok, nullptr);
    const std::string text = j["text"].get<std::string>();
    EXPECT_EQ(tok->Encode(text, EncodeOptions{false, true}),
              j["parse_special"].get<std::vector<TokenId>>())
        << j["vocab"] << " " << j["text"];
    EXPECT_EQ(tok->Encode(text, EncodeOptions{false, false}), j["plain"].get<std::vector<TokenId>>())
        << j["vocab"] << " " << j["text"];
    EXPECT_EQ(tok->Encode(text, false), j["plain"].get<std::vector<TokenId>>());
    ++checked;
  }
  EXPECT_GE(checked, 15u);
}

// llama.cpp's end-of-generation set: EOS, EOT, EOM and tokens known by text.
TEST(TokenizerTest, EndOfGenerationIds) {
  auto llama3 = LoadTokenizer(VocabPath("llama-bpe"));
  ASSERT_NE(llama3, nullptr);
  const std::vector<TokenId> eog = llama3->EndOfGenerationIds();
  for (TokenId id : {128001, 128009}) {  // <|end_of_text|>, <|eot_id|>
    EXPECT_THAT(eog, Contains(id));
    EXPECT_TRUE(llama3->IsEndOfGeneration(id));
  }
  // Llama 3.0 has no <|eom_id|> (128008 is a reserved token there); EOM is
  // checked with tokenizer.ggml.eom_token_id in LlamaExplicitValues.
  EXPECT_EQ(llama3->TokenText(128008), "<|reserved_special_token_4|>");
  EXPECT_FALSE(llama3->IsEndOfGeneration(128008));
  EXPECT_FALSE(llama3->IsEndOfGeneration(128000));  // BOS
  EXPECT_TRUE(llama3->add_bos());                   // llama.cpp's default for llama-bpe
  auto gemma3 = LoadTokenizer(VocabPath("gemma-3"));
  ASSERT_NE(gemma3, nullptr);
  EXPECT_TRUE(gemma3->IsEndOfGeneration(106));  // <end_of_turn>
  EXPECT_TRUE(gemma3->IsEndOfGeneration(1));    // <eos>
  EXPECT_FALSE(gemma3->add_space_prefix());
  // Extra ids (generation_config.json) are kept with the vocabulary's own.
  llama3->AddEndOfGenerationIds(std::vector<TokenId>{5, 128255, 200000, -3});
  EXPECT_TRUE(llama3->IsEndOfGeneration(5));
  EXPECT_TRUE(llama3->IsEndOfGeneration(128009));
  EXPECT_FALSE(llama3->IsEndOfGeneration(200000));
  EXPECT_THAT(llama3->EndOfGenerationIds(), Contains(128255));
}

TEST(TokenizerTest, Stories260KKnownIds) {
  auto tokenizer = LoadTokenizer(std::string(TESSERA_SOURCE_DIR) + "/models/stories260K.gguf");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->model_name(), "llama");
  EXPECT_EQ(tokenizer->vocab_size(), 512);
  EXPECT_TRUE(tokenizer->add_bos());
  const std::vector<TokenId> ids = tokenizer->Encode("Once upon a time", tokenizer->add_bos());
  EXPECT_THAT(ids, ElementsAre(1, 403, 407, 261, 378));
  EXPECT_EQ(tokenizer->Decode(ids), "Once upon a time");
}

TEST(TokenizerTest, LlamaSpecialTokensAndPieces) {
  auto tok = LoadTokenizer(VocabPath("llama-spm"));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_TRUE(tok->IsControl(1));
  EXPECT_TRUE(tok->IsControl(2));
  EXPECT_FALSE(tok->IsControl(15043));
  EXPECT_TRUE(tok->IsEndOfGeneration(2));
  EXPECT_FALSE(tok->IsEndOfGeneration(1));
  EXPECT_FALSE(tok->IsEndOfGeneration(-1));
  EXPECT_EQ(tok->TokenText(1), "<s>");
  EXPECT_EQ(tok->TokenBytes(1), "");
  EXPECT_EQ(tok->TokenText(15043), "\xE2\x96\x81Hello");
  EXPECT_EQ(tok->TokenBytes(15043), " Hello");
  EXPECT_EQ(tok->TokenText(3 + 0x41), "<0x41>");
  EXPECT_EQ(tok->TokenBytes(3 + 0x41), "A");
  EXPECT_EQ(tok->TokenBytes(3 + 0xF0), "\xF0");
  EXPECT_EQ(tok->TokenText(-1), "");
  EXPECT_EQ(tok->TokenText(32000), "");
  EXPECT_EQ(tok->TokenBytes(32000), "");
  // Special-token text in the input is plain text.
  EXPECT_THAT(tok->Encode("<s></s>", false), Not(Contains(1)));
  EXPECT_THAT(tok->Encode("<s></s>", false), Not(Contains(2)));
  EXPECT_EQ(tok->Decode(tok->Encode("<s></s>", true)), "<s></s>");
  EXPECT_THAT(tok->Encode("", true), ElementsAre(1));
  EXPECT_TRUE(tok->Encode("", false).empty());
}

TEST(TokenizerTest, Gpt2SpecialTokensAndPieces) {
  auto tok = LoadTokenizer(VocabPath("gpt-2"));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->model_name(), "gpt2");
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->bos_id(), 50256);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_FALSE(tok->add_space_prefix());
  EXPECT_TRUE(tok->IsControl(50256));
  EXPECT_TRUE(tok->IsEndOfGeneration(50256));
  EXPECT_EQ(tok->TokenBytes(50256), "");
  EXPECT_EQ(tok->TokenText(220), "\xC4\xA0");  // "Ġ", the stand-in for a space
  EXPECT_EQ(tok->TokenBytes(220), " ");
  EXPECT_EQ(tok->TokenBytes(198), "\n");
  EXPECT_THAT(tok->Encode("<|endoftext|>", false), Not(Contains(50256)));
  EXPECT_THAT(tok->Encode("Hello", true), ElementsAre(50256, 15496));
  // A leading space is content for gpt2 and never stripped.
  EXPECT_EQ(tok->Decode(tok->Encode(" Hello", false)), " Hello");
}

// Callers should validate text first, but ill-formed bytes must not crash
// either tokenizer, and both keep every byte.
TEST(TokenizerTest, IllFormedInputKeepsBytes) {
  const std::string bad = "a\xFF b\xE7\x8C \xC0\xAF\xF0\x9F";
  for (const char* name : {"llama-spm", "gpt-2"}) {
    auto tok = LoadTokenizer(VocabPath(name));
    ASSERT_NE(tok, nullptr);
    std::string bytes;
    for (TokenId id : tok->Encode(bad, false)) bytes += tok->TokenBytes(id);
    EXPECT_EQ(bytes, (tok->add_space_prefix() ? " " : "") + bad) << name;
    EXPECT_TRUE(IsValidUtf8(tok->Decode(tok->Encode(bad, false)))) << name;
  }
}

// Feeds ids one at a time and checks every piece is valid UTF-8.
std::string StreamDecode(const Tokenizer& tok, const std::vector<TokenId>& ids, bool strip) {
  IncrementalDetokenizer detok(tok, strip);
  std::string text;
  for (TokenId id : ids) {
    const std::string piece = detok.Push(id);
    EXPECT_TRUE(IsValidUtf8(piece)) << "after id " << id;
    text += piece;
  }
  const std::string rest = detok.Flush();
  EXPECT_TRUE(IsValidUtf8(rest));
  return text + rest;
}

TEST(IncrementalDetokenizerTest, HoldsBackSplitCharacters) {
  const std::string text =
      "Llama \xF0\x9F\xA6\x99 and \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB"
      "\xEF\xB8\x8F, \xE7\x8C\xAB \xEA\xB0\x80 \xE1\x9E\x80\xE1\x9E\xB6!";
  for (const char* name : {"llama-spm", "gpt-2"}) {
    auto tok = LoadTokenizer(VocabPath(name));
    ASSERT_NE(tok, nullptr);
    const std::vector<TokenId> ids = tok->Encode(text, true);
    // Some characters must be split over several tokens for this to test anything.
    size_t split = 0;
    for (TokenId id : ids) split += IsValidUtf8(tok->TokenBytes(id)) ? 0 : 1;
    EXPECT_GT(split, 2u) << name;
    EXPECT_EQ(StreamDecode(*tok, ids, true), text) << name;
    EXPECT_EQ(StreamDecode(*tok, ids, true), tok->Decode(ids)) << name;
  }
}

TEST(IncrementalDetokenizerTest, LeadingSpaceAndInvalidBytes) {
  auto tok = LoadTokenizer(VocabPath("llama-spm"));
  ASSERT_NE(tok, nullptr);
  const TokenId hello = 15043;  // "▁Hello"
  const auto byte = [](int b) { return static_cast<TokenId>(3 + b); };
  {
    IncrementalDetokenizer detok(*tok, /*strip_leading_space=*/true);
    EXPECT_EQ(detok.Push(1), "");  // BOS decodes to nothing and is not the first piece
    EXPECT_EQ(detok.Push(hello), "Hello");
    EXPECT_EQ(detok.Push(hello), " Hello");
  }
  {
    IncrementalDetokenizer detok(*tok, /*strip_leading_space=*/false);
    EXPECT_EQ(detok.Push(hello), " Hello");
  }
  {
    IncrementalDetokenizer detok(*tok, false);
    EXPECT_EQ(detok.Push(byte(0xE7)), "");
    EXPECT_EQ(detok.Push(byte(0x8C)), "");
    EXPECT_EQ(detok.Push(byte(0xAB)), "\xE7\x8C\xAB");
    // A lead byte followed by ASCII: the lead byte can never complete.
    EXPECT_EQ(detok.Push(byte(0xF0)), "");
    EXPECT_EQ(detok.Push(byte('A')),
              "\xEF\xBF\xBD"
              "A");
    EXPECT_EQ(detok.Push(byte(0xFF)), "\xEF\xBF\xBD");
    EXPECT_EQ(detok.Push(byte(0xE2)), "");
    EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");
    EXPECT_EQ(detok.Flush(), "");
  }
  const std::vector<TokenId> ids = {byte(0xE7), byte(0x8C)};
  EXPECT_EQ(tok->Decode(ids), "\xEF\xBF\xBD");
}

TEST(Utf8Test, IsValidUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ASCII"));
  EXPECT_TRUE(IsValidUtf8("\xC2\x80 \xDF\xBF \xE0\xA0\x80 \xEF\xBF\xBF"));
  EXPECT_TRUE(IsValidUtf8("\xF0\x90\x80\x80 \xF4\x8F\xBF\xBF"));  // U+10000, U+10FFFF
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xC1\xBF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xE0\x9F\xBF"));      // overlong 3-byte
  EXPECT_FALSE(IsValidUtf8("\xF0\x8F\xBF\xBF"));  // overlong 4-byte
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // U+D800, a surrogate
  EXPECT_FALSE(IsValidUtf8("\xED\xBF\xBF"));      // U+DFFF
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(IsValidUtf8("\xF5\x80\x80\x80"));
  EXPECT_FALSE(IsValidUtf8("\xE7\x8C"));         // truncated
  EXPECT_FALSE(IsValidUtf8("abc\xF0\x9F\xA6"));  // truncated at the end
  EXPECT_FALSE(IsValidUtf8("\x80"));             // lone continuation byte
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\xE7\x41\xAB"));  // continuation replaced by ASCII
}

// A tiny llama vocab: specials, a few pieces and all 256 byte tokens.
GgufWriter TinyLlamaWriter() {
  std::vector<std::string> tokens = {"<unk>",
                                     "<s>",
                                     "</s>",
                                     "\xE2\x96\x81",
                                     "a",
                                     "b",
                                     "ab",
                                     "\xE2\x96\x81"
                                     "ab"};
  std::vector<float> scores = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1};
  const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    scores.push_back(0);
    types.push_back(6);
  }
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", scores);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  return w;
}

// A tiny gpt2 vocab over the byte alphabet's "a", "b" and "Ġ" (space).
GgufWriter TinyGpt2Writer(bool with_endoftext) {
  std::vector<std::string> tokens = {"a", "b", "\xC4\xA0", "ab",
                                     "\xC4\xA0"
                                     "ab"};
  if (with_endoftext) tokens.push_back("<|endoftext|>");
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetStringArray("tokenizer.ggml.merges", {"a b", "\xC4\xA0 ab"});
  return w;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> FromWriter(const GgufWriter& w) {
  auto file = GgufFile::FromBytes(w.Serialize());
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(**file);
}

TEST(TokenizerMetadataTest, LlamaDefaults) {
  auto tok = FromWriter(TinyLlamaWriter());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_TRUE((*tok)->add_space_prefix());
  // "▁ab" (-0.25) beats "ab" (-0.5); "c" falls back to its byte token.
  EXPECT_THAT((*tok)->Encode("ab c", true), ElementsAre(1, 7, 3, 3 + 5 + 'c'));
}

TEST(TokenizerMetadataTest, LlamaExplicitValues) {
  GgufWriter w = TinyLlamaWriter();
  w.SetUint32("tokenizer.ggml.bos_token_id", 4);
  w.SetUint32("tokenizer.ggml.eos_token_id", 5);
  w.SetUint32("tokenizer.ggml.eot_token_id", 6);
  w.SetUint32("tokenizer.ggml.eom_token_id", 3);
  w.SetUint32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // "none"
  w.SetBool("tokenizer.ggml.add_bos_token", false);
  w.SetBool("tokenizer.ggml.add_space_prefix", false);
  auto tok = FromWriter(w);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bos_id(), 4);
  EXPECT_EQ((*tok)->eos_id(), 5);
  EXPECT_TRUE((*tok)->IsEndOfGeneration(5));
  EXPECT_TRUE((*tok)->IsEndOfGeneration(6));
  EXPECT_TRUE((*tok)->IsEndOfGeneration(3));  // EOM
  // "</s>" still ends generation: llama.cpp recognises it by its text.
  EXPECT_TRUE((*tok)->IsEndOfGeneration(2));
  EXPECT_FALSE((*tok)->IsEndOfGeneration(4));
  EXPECT_FALSE((*tok)->add_bos());
  EXPECT_FALSE((*tok)->add_space_prefix());
  EXPECT_THAT((*tok)->Encode("ab", false), ElementsAre(6));
  EXPECT_EQ((*tok)->Decode(std::vector<TokenId>{7}), " ab");  // no prefix to strip
}

TEST(TokenizerMetadataTest, Gpt2Defaults) {
  auto with = FromWriter(TinyGpt2Writer(/*with_endoftext=*/true));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ((*with)->bos_id(), 5);
  EXPECT_EQ((*with)->eos_id(), 5);
  EXPECT_FALSE((*with)->add_bos());
  EXPECT_THAT((*with)->Encode("ab ab", false), ElementsAre(3, 4));
  EXPECT_THAT((*with)->Encode("ab", true), ElementsAre(5, 3));
  EXPECT_THAT((*with)->Encode(" ba", false), ElementsAre(2, 1, 0));

  auto without = FromWriter(TinyGpt2Writer(/*with_endoftext=*/false));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ((*without)->bos_id(), -1);  // 50256 is out of range
  EXPECT_EQ((*without)->eos_id(), -1);
  EXPECT_THAT((*without)->Encode("ab", true), ElementsAre(3));
}

void ExpectError(const GgufWriter& w, absl::StatusCode code, const std::string& what) {
  // The file itself must be well-formed, so that the error is the tokenizer's.
  auto file = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(file.ok()) << what << ": " << file.status();
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_FALSE(tok.ok()) << what;
  if (!tok.ok()) {
    EXPECT_EQ(tok.status().code(), code) << what << ": " << tok.status();
  }
}

TEST(TokenizerMetadataTest, RejectsMalformedVocab) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  {
    GgufWriter w = TinyLlamaWriter();
    w.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0});
    ExpectError(w, kInvalid, "scores length mismatch");
  }
  {
    GgufWriter w = TinyLlamaWriter();
    w.SetInt32Array("tokenizer.ggml.token_type", {1, 1});
    ExpectError(w, kInvalid, "token_type length mismatch");
  }
  {
    GgufWriter w = TinyLlamaWriter();
    std::vector<int32_t> types(264, 1);
    types[7] = 9;
    w.SetInt32Array("tokenizer.ggml.token_type", types);
    ExpectError(w, kInvalid, "unknown token type");
  }
  {
    GgufWriter w = TinyLlamaWriter();
    w.SetUint32("tokenizer.ggml.bos_token_id", 264);
    ExpectError(w, kInvalid, "bos out of range");
  }
  {
    GgufWriter w = TinyLlamaWriter();
    w.SetInt32("tokenizer.ggml.eos_token_id", -7);
    ExpectError(w, kInvalid, "negative eos");
  }
  {
    GgufWriter w = TinyLlamaWriter();
    w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "", "x"});
    w.SetFloat32Array("tokenizer.ggml.scores", {0, 0, 0});
    w.SetInt32Array("tokenizer.ggml.token_type", {2, 1, 1});
    ExpectError(w, kInvalid, "empty token");
  }
  {
    GgufWriter w = TinyLlamaWriter();
    w.SetStringArray("tokenizer.ggml.tokens", {});
    ExpectError(w, kInvalid, "no tokens");
  }
  for (const std::string bad : {"ab", "a ", " ", "a"}) {
    GgufWriter w = TinyGpt2Writer(true);
    w.SetStringArray("tokenizer.ggml.merges", {"a b", bad});
    ExpectError(w, kInvalid, "bad merge \"" + bad + "\"");
  }
  {
    GgufWriter w;
    w.SetString("tokenizer.ggml.model", "gpt2");
    w.SetStringArray("tokenizer.ggml.tokens", {"a"});
    ExpectError(w, absl::StatusCode::kNotFound, "gpt2 without merges");
  }
  {
    GgufWriter w;
    w.SetStringArray("tokenizer.ggml.tokens", {"a"});
    ExpectError(w, kInvalid, "no tokenizer.ggml.model");
  }
  {
    GgufWriter w = TinyLlamaWriter();
    w.SetString("tokenizer.ggml.model", "bert");
    ExpectError(w, absl::StatusCode::kUnimplemented, "unknown model");
  }
  {
    GgufWriter w = TinyGpt2Writer(true);
    w.SetString("tokenizer.ggml.pre", "no-such-pre-tokenizer");
    ExpectError(w, absl::StatusCode::kUnimplemented, "unsupported pre-tokenizer");
  }
  {
    GgufWriter w = TinyLlamaWriter();
    w.SetString("tokenizer.ggml.add_bos_token", "yes");
    ExpectError(w, kInvalid, "add_bos_token of the wrong type");
  }
}

// ~200 KB of mixed text, plus runs that make single huge symbols/words.
std::string LargeInput() {
  std::string text;
  const std::string chunk =
      "The quick brown fox, 12345 times!  \t\xE7\x8C\xAB\xE3\x81\x8B "
      "\xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE "
      "\xF0\x9F\xA6\x99\n";
  while (text.size() < 150000) text += chunk;
  text += std::string(25000, 'a');
  text += std::string(25000, ' ');
  return text;
}

TEST(TokenizerPerformanceTest, LargeInputIsFast) {
  const std::string text = LargeInput();
  for (const char* name : {"llama-spm", "gpt-2"}) {
    auto tok = LoadTokenizer(VocabPath(name));
    ASSERT_NE(tok, nullptr);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<TokenId> ids = tok->Encode(text, false);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Quadratic merging would take minutes on 200 KB; this bound is loose
    // enough for a busy machine, and looser for unoptimized and sanitizer
    // builds (Debug + AddressSanitizer is some 25 times slower here).
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
    EXPECT_LT(seconds, 1.0) << name;
#else
    EXPECT_LT(seconds, 30.0) << name;
#endif
    EXPECT_GT(ids.size(), 10000u);
    EXPECT_EQ(tok->Decode(ids), text) << name;
  }
}

}  // namespace
}  // namespace tessera
