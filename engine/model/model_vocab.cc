// Vocabularies for random models: synthetic llama (SentencePiece-style) and
// gpt2 (byte-level BPE) vocabs, and copying one from another GGUF file.
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/model/model_writer.h"

namespace tessera {
namespace {

// llama.cpp token types.
constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeUnknown = 2;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeByte = 6;

std::string Utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
  return out;
}

bool IsGpt2Printable(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

// Byte values in GPT-2 vocabulary order: printable bytes first, then the rest.
std::vector<int> Gpt2ByteOrder() {
  std::vector<int> order;
  for (int b = 0; b < 256; ++b) {
    if (IsGpt2Printable(b)) order.push_back(b);
  }
  for (int b = 0; b < 256; ++b) {
    if (!IsGpt2Printable(b)) order.push_back(b);
  }
  return order;
}

// Enumerates the lowercase strings of length 1, 2, 3, ... in order.
class LetterStrings {
 public:
  explicit LetterStrings(size_t first_length) : current_(first_length, 'a') {}
  const std::string& current() const { return current_; }
  void Advance() {
    for (size_t i = current_.size(); i-- > 0;) {
      if (current_[i] != 'z') {
        ++current_[i];
        return;
      }
      current_[i] = 'a';
    }
    current_.assign(current_.size() + 1, 'a');
  }

 private:
  std::string current_;
};

}  // namespace

const std::array<std::string, 256>& Gpt2ByteToUnicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    uint32_t next_extra = 256;  // non-printable bytes take U+0100, U+0101, ...
    for (int b = 0; b < 256; ++b) {
      t[b] = Utf8(IsGpt2Printable(b) ? static_cast<uint32_t>(b) : next_extra++);
    }
    return t;
  }();
  return table;
}

absl::Status AddSyntheticLlamaVocab(uint32_t vocab_size, GgufWriter* writer) {
  if (vocab_size < 259) {
    return absl::InvalidArgumentError(
        absl::StrCat("llama vocab size ", vocab_size, " is below 259 (3 specials + 256 bytes)"));
  }
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kTypeUnknown, kTypeControl, kTypeControl};
  tokens.reserve(vocab_size);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
  }
  types.resize(tokens.size(), kTypeByte);
  // "▁" (U+2581) marks a word start. Every piece's prefixes are present
  // earlier, so the pieces are reachable by merging.
  const std::string space = "\xe2\x96\x81";
  std::vector<std::string> pieces = {space};
  for (LetterStrings s(1); tokens.size() + pieces.size() < vocab_size; s.Advance()) {
    pieces.push_back(space + s.current());
    if (tokens.size() + pieces.size() < vocab_size) pieces.push_back(s.current());
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t i = 0; i < pieces.size(); ++i) {
    tokens.push_back(std::move(pieces[i]));
    scores.push_back(-static_cast<float>(i + 1));  // earlier (shorter) pieces win
    types.push_back(kTypeNormal);
  }
  writer->SetString("tokenizer.ggml.model", "llama");
  writer->SetStringArray("tokenizer.ggml.tokens", tokens);
  writer->SetFloat32Array("tokenizer.ggml.scores", scores);
  writer->SetInt32Array("tokenizer.ggml.token_type", types);
  writer->SetUint32("tokenizer.ggml.bos_token_id", 1);
  writer->SetUint32("tokenizer.ggml.eos_token_id", 2);
  writer->SetUint32("tokenizer.ggml.unknown_token_id", 0);
  writer->SetBool("tokenizer.ggml.add_bos_token", true);
  writer->SetBool("tokenizer.ggml.add_eos_token", false);
  return absl::OkStatus();
}

absl::Status AddSyntheticGpt2Vocab(uint32_t vocab_size, GgufWriter* writer) {
  if (vocab_size < 257) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpt2 vocab size ", vocab_size, " is below 257 (256 bytes + <|endoftext|>)"));
  }
  const auto& chars = Gpt2ByteToUnicode();
  std::vector<std::string> tokens;
  tokens.reserve(vocab_size);
  for (int b : Gpt2ByteOrder()) tokens.push_back(chars[b]);
  const std::string space = chars[' '];  // "Ġ"
  std::vector<std::string> merges;
  // Each merged piece joins two earlier tokens: "Ġ" + letter, then for longer
  // strings s: s[:-1] + last letter and "Ġ" + s[:-1] + last letter.
  auto add = [&](std::string left, std::string right) {
    if (tokens.size() + 1 >= vocab_size) return;
    tokens.push_back(left + right);
    merges.push_back(absl::StrCat(left, " ", right));
  };
  for (LetterStrings s(1); s.current().size() == 1; s.Advance()) add(space, s.current());
  for (LetterStrings s(2); tokens.size() + 1 < vocab_size; s.Advance()) {
    const std::string& w = s.current();
    add(w.substr(0, w.size() - 1), w.substr(w.size() - 1));
    add(space + w.substr(0, w.size() - 1), w.substr(w.size() - 1));
  }
  std::vector<int32_t> types(tokens.size(), kTypeNormal);
  tokens.push_back("<|endoftext|>");
  types.push_back(kTypeControl);
  writer->SetString("tokenizer.ggml.model", "gpt2");
  writer->SetString("tokenizer.ggml.pre", "gpt-2");
  writer->SetStringArray("tokenizer.ggml.tokens", tokens);
  writer->SetInt32Array("tokenizer.ggml.token_type", types);
  writer->SetStringArray("tokenizer.ggml.merges", merges);
  writer->SetUint32("tokenizer.ggml.bos_token_id", vocab_size - 1);
  writer->SetUint32("tokenizer.ggml.eos_token_id", vocab_size - 1);
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> CopyVocab(const GgufFile& from, GgufWriter* writer) {
  absl::StatusOr<std::vector<std::string>> tokens = from.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status();
  if (tokens->empty() ||
      tokens->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.ggml.tokens has ", tokens->size(), " entries"));
  }
  for (const auto& [key, value] : from.metadata()) {
    if (absl::StartsWith(key, "tokenizer.ggml.")) writer->SetValue(key, value);
  }
  return static_cast<uint32_t>(tokens->size());
}

}  // namespace tessera
