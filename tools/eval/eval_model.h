// One model opened for evaluation (a GGUF file or a Hugging Face folder):
// its tokenizer and CPU forward pass, run over chunks of tokens one
// sub-batch at a time with a KV cache of one chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::eval {

struct EvalModelOptions {
  int32_t ctx = 512;    // tokens per chunk (the KV cache holds one chunk)
  int32_t batch = 512;  // tokens per forward step
  int32_t threads = 0;  // CPU threads; 0 = one per core
  DType kv_dtype = DType::kF32;  // the KV cache's element type (f32, f16 or int8)
};

class EvalModel {
 public:
  static absl::StatusOr<std::unique_ptr<EvalModel>> Open(const std::string& path,
                                                         const EvalModelOptions& options);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelConfig& config() const { return model_->config(); }
  int32_t vocab_size() const { return model_->config().vocab_size; }

  // Runs chunk[begin, end) at positions begin..end-1, after chunk[0, begin)
  // went through earlier calls (begin == 0 starts a new chunk). Writes the
  // logits of the rows at positions [score_begin, score_end) that fall in
  // [begin, end) to `logits` ([rows, vocab], resized), and returns the
  // position of the first of them.
  absl::StatusOr<int32_t> Step(std::span<const int32_t> chunk, int32_t begin, int32_t end,
                               int32_t score_begin, int32_t score_end, std::vector<float>* logits);

 private:
  EvalModel() = default;

  EvalModelOptions options_;
  std::unique_ptr<GgufFile> file_;  // the GGUF file, or the folder's weights as one
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> blocks_;  // the chunk's block table: 0, 1, 2, ...
};

// OK when both tokenizers have the same vocabulary (every token's text), the
// same BOS and the same add-BOS setting; FAILED_PRECONDITION naming the first
// difference otherwise.
absl::Status CheckSameVocab(const Tokenizer& a, const Tokenizer& b);

}  // namespace tessera::eval
