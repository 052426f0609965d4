// Tokenizers built from a GGUF file's `tokenizer.ggml.*` metadata.
//
//   tokenizer.ggml.model = "llama": SentencePiece-style BPE over token scores,
//     with byte fallback (<0xXX> tokens) and SentencePiece's leading-space
//     handling (spaces become U+2581, a space is prefixed to the input).
//   tokenizer.ggml.model = "gpt2": byte-level BPE over merge ranks, with the
//     pre-tokenizer split that `tokenizer.ggml.pre` names (bpe_pre.h).
// and from Hugging Face tokenizer.json files (hf_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

class GgufFile;

using TokenId = int32_t;

struct EncodeOptions {
  // Prepend the model's BOS token (when it has one).
  bool add_bos = false;
  // Match special tokens written in the text (e.g. "<|eot_id|>") and emit
  // their ids, as llama.cpp's parse_special and Hugging Face's added tokens
  // do. When false, control tokens are ordinary text; GGUF user-defined
  // tokens and Hugging Face non-special added tokens are still matched.
  bool parse_special = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Reads the vocabulary from the file. Special ids and add-BOS behaviour
  // follow `tokenizer.ggml.{bos,eos,unknown,padding}_token_id` and
  // `tokenizer.ggml.add_bos_token`, with llama.cpp's defaults when absent
  // (llama: bos 1, eos 2, unk 0, add_bos true; gpt2: bos = eos = the id of
  // "<|endoftext|>", else 50256 when in range, add_bos false). An id stored as
  // -1 or 0xFFFFFFFF means "none"; any other out-of-range id is an error.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);

  // Builds a tokenizer from a Hugging Face `tokenizer.json` and its
  // `tokenizer_config.json` (the texts of the two files; the second may be
  // empty when the folder has none). The BPE model with the components listed
  // in hf_tokenizer.h; anything else is refused with kUnimplemented naming
  // it, malformed input with kInvalidArgument. bos_id()/eos_id() come from
  // the config's bos_token/eos_token; add_bos() is true when the
  // post-processor (TemplateProcessing) puts special tokens in front, and
  // Encode with add_bos applies that template. model_name() is "hf-bpe".
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromHuggingFace(
      std::string_view tokenizer_json, std::string_view tokenizer_config_json);

  // Tokenizes valid UTF-8 text (callers validate first; ill-formed bytes are
  // kept but may tokenize differently from the references).
  virtual std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options) const = 0;
  // Encode without parsing special tokens: control-token text such as "<s>"
  // is ordinary text. When add_bos is true and the model has a BOS token, it
  // is prepended.
  std::vector<TokenId> Encode(std::string_view text, bool add_bos) const {
    return Encode(text, EncodeOptions{add_bos, /*parse_special=*/false});
  }

  // The raw bytes a token stands for when detokenized: for llama, U+2581 is
  // turned into a space and <0xXX> into that byte; for gpt2 the byte-level
  // alphabet is mapped back to bytes. Control tokens (BOS/EOS...) give "".
  // The result may be an incomplete UTF-8 sequence.
  virtual std::string TokenBytes(TokenId id) const = 0;

  // The vocabulary entry as stored in the file (for display and tests).
  virtual const std::string& TokenText(TokenId id) const = 0;

  // Decodes a whole sequence. For llama, the leading space of the first
  // piece is removed as SentencePiece does, when `strip_leading_space`.
  // Invalid UTF-8 in the joined bytes is replaced by U+FFFD.
  std::string Decode(std::span<const TokenId> ids, bool strip_leading_space = true) const;

  virtual std::string_view model_name() const = 0;  // "llama" or "gpt2"
  int32_t vocab_size() const { return vocab_size_; }
  TokenId bos_id() const { return bos_id_; }  // -1 when the model has none
  TokenId eos_id() const { return eos_id_; }  // -1 when the model has none
  bool add_bos() const { return add_bos_; }
  // True when encoding prefixes a space (llama's `add_space_prefix`); Decode
  // and IncrementalDetokenizer strip it again only for such models.
  bool add_space_prefix() const { return add_space_prefix_; }
  // True for tokens that end generation: EOS, EOT and EOM where the vocab has
  // them (GGUF: tokenizer.ggml.{eos,eot,eom}_token_id, and the tokens llama.cpp
  // recognises by text such as "<|eot_id|>", "<|im_end|>", "<end_of_turn>"),
  // and any id added with AddEndOfGenerationIds.
  bool IsEndOfGeneration(TokenId id) const;
  // Adds ids that also end generation (a model's `generation_config.json`
  // `eos_token_id` list); ids outside the vocabulary are ignored.
  void AddEndOfGenerationIds(std::span<const TokenId> ids);
  // Every id that ends generation, ascending.
  std::vector<TokenId> EndOfGenerationIds() const;
  // True for control tokens (token_type == 3), which decode to "".
  virtual bool IsControl(TokenId id) const = 0;

 protected:
  int32_t vocab_size_ = 0;
  TokenId bos_id_ = -1;
  TokenId eos_id_ = -1;
  TokenId eot_id_ = -1;
  TokenId eom_id_ = -1;
  std::vector<TokenId> extra_eog_ids_;  // sorted, unique
  bool add_bos_ = false;
  bool add_space_prefix_ = false;
};

// Turns a stream of token ids into text without ever emitting part of a
// UTF-8 character: bytes of an incomplete character are held back until the
// character completes. Bytes that can never form valid UTF-8 are emitted as
// U+FFFD. With `strip_leading_space` (for a stream that starts a text, as
// SentencePiece decodes), the leading space of the first non-empty piece is
// removed for models that add a space prefix; generated continuations pass
// false and keep it.
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool strip_leading_space);

  // Returns the text completed by this token (possibly empty).
  std::string Push(TokenId id);
  // Returns any held-back bytes as U+FFFD (end of stream).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool strip_leading_space_;
  bool at_start_ = true;
  std::string pending_;  // bytes of an incomplete UTF-8 character
};

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or values
// above U+10FFFF).
bool IsValidUtf8(std::string_view text);

}  // namespace tessera
