// Tokenizers: arbitrary bytes encoded (with and without special-token
// parsing), and arbitrary ids decoded, whole and incrementally, for the
// committed vocabularies: llama SPM, GPT-2 and llama3-style BPE GGUF vocabs,
// and the llama3 and tiny SentencePiece-BPE tokenizer.json files.
//
// Input: byte 0 picks the tokenizer and the options; the rest is the text,
// and is also read as little-endian 16-bit ids (spread over the vocab and
// just past it).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "fuzz_util.h"
#include "tests/testing/gzip_file.h"

namespace {

using tessera::Tokenizer;
using tessera::TokenId;

// REL, or where it is stored gzipped (REL.gz), a copy unpacked under the build tree.
std::unique_ptr<Tokenizer> FromGgufOrDie(const char* rel) {
  const std::string path = tessera::testing::UnpackedPath(tessera::fuzz::SourcePath(rel));
  auto file = tessera::GgufFile::Open(path);
  tessera::fuzz::Check(file.ok(), rel);
  auto tok = Tokenizer::FromGguf(**file);
  tessera::fuzz::Check(tok.ok(), rel);
  return *std::move(tok);
}

std::unique_ptr<Tokenizer> FromHfOrDie(const char* dir) {
  const std::string base = tessera::fuzz::SourcePath(std::string("tests/data/tokenizers/") + dir);
  auto tok = Tokenizer::FromHuggingFace(tessera::fuzz::ReadGzipOrDie(base + "/tokenizer.json.gz"),
                                        tessera::fuzz::ReadFileOrDie(base + "/tokenizer_config.json"));
  tessera::fuzz::Check(tok.ok(), dir);
  return *std::move(tok);
}

const std::vector<std::unique_ptr<Tokenizer>>& Tokenizers() {
  static const auto* const kAll = [] {
    auto* all = new std::vector<std::unique_ptr<Tokenizer>>();
    all->push_back(FromGgufOrDie("tests/data/vocab/ggml-vocab-llama-spm.gguf"));
    all->push_back(FromGgufOrDie("tests/data/vocab/ggml-vocab-gpt-2.gguf"));
    all->push_back(FromGgufOrDie("tests/data/vocab/ggml-vocab-llama-bpe.gguf"));
    all->push_back(FromHfOrDie("llama3"));
    all->push_back(FromHfOrDie("tiny-spm"));
    return all;
  }();
  return *kAll;
}

// The GGUF byte-level BPE vocabs (gpt-2, llama-bpe).
bool RoundTrips(uint8_t selector) {
  const size_t i = (selector & 0x0f) % Tokenizers().size();
  return i == 1 || i == 2;
}

void CheckIds(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  for (TokenId id : ids) {
    tessera::fuzz::Check(id >= 0 && id < tok.vocab_size(), "encoded id within the vocabulary");
  }
}

void DecodeIds(const Tokenizer& tok, std::string_view raw, bool strip) {
  std::vector<TokenId> ids;
  const int64_t span = static_cast<int64_t>(tok.vocab_size()) + 16;
  for (size_t i = 0; i + 1 < raw.size(); i += 2) {
    const uint32_t v = static_cast<uint8_t>(raw[i]) | (static_cast<uint8_t>(raw[i + 1]) << 8);
    // Spread 16 bits over the whole vocab, with a few ids past its end and -1.
    ids.push_back(static_cast<TokenId>(static_cast<int64_t>(v) * span / 65536 - 1));
  }
  const std::string whole = tok.Decode(ids, strip);
  tessera::fuzz::Check(tessera::IsValidUtf8(whole), "Decode gives valid UTF-8");
  tessera::IncrementalDetokenizer inc(tok, strip);
  std::string streamed;
  for (TokenId id : ids) {
    const std::string piece = inc.Push(id);
    tessera::fuzz::Check(tessera::IsValidUtf8(piece), "Push gives valid UTF-8");
    streamed += piece;
    (void)tok.TokenText(id);
    (void)tok.IsControl(id);
    (void)tok.IsEndOfGeneration(id);
  }
  streamed += inc.Flush();
  tessera::fuzz::Check(tessera::IsValidUtf8(streamed), "the stream is valid UTF-8");
}

}  // namespace

// Loading the vocabularies takes seconds under ASan: done before the first
// input, so that it is not reported as a slow input.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)Tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = Tokenizers();
  const uint8_t selector = data[0];
  const Tokenizer& tok = *all[(selector & 0x0f) % all.size()];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const tessera::EncodeOptions options{(selector & 0x10) != 0, (selector & 0x20) != 0};
  const std::vector<TokenId> ids = tok.Encode(text, options);
  CheckIds(tok, ids);
  // Byte-level BPE without normalization gives back exactly the text.
  if (RoundTrips(selector) && !options.parse_special && tessera::IsValidUtf8(text)) {
    tessera::fuzz::Check(tok.Decode(ids) == text, "byte-level BPE decodes to the encoded text");
  }
  DecodeIds(tok, text, (selector & 0x40) != 0);
  return 0;
}
