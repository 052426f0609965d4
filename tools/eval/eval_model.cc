#include "tools/eval/eval_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/backend.h"
#include "engine/format/hf_model.h"
#include "engine/source_tokenizer.h"

namespace tessera::eval {
namespace {

constexpr int32_t kBlockSize = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<EvalModel>> EvalModel::Open(const std::string& path,
                                                           const EvalModelOptions& options) {
  if (options.ctx < 4 || options.batch < 1) {
    return absl::InvalidArgumentError("ctx must be at least 4 and batch at least 1");
  }
  std::unique_ptr<EvalModel> m(new EvalModel());
  m->options_ = options;
  m->options_.batch = std::min(options.batch, options.ctx);
  auto source = OpenModelSource(path);
  if (!source.ok()) return source.status();
  auto tokenizer = OpenSourceTokenizer(*source);
  if (!tokenizer.ok()) return tokenizer.status();
  m->tokenizer_ = std::move(*tokenizer);
  m->file_ = std::move(source->file);
  BackendOptions backend_options;
  backend_options.device = "cpu";
  backend_options.num_threads = options.threads;
  auto backend = CreateBackend(backend_options);
  if (!backend.ok()) return backend.status();
  const int32_t batch = m->options_.batch;
  auto model = Model::Load(*m->file_, std::move(*backend), batch, batch);
  if (!model.ok()) return model.status();
  m->model_ = std::move(*model);
  if (m->model_->config().vocab_size != m->tokenizer_->vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the output head has ", m->model_->config().vocab_size,
                     " rows but the tokenizer ", m->tokenizer_->vocab_size(), " tokens"));
  }
  const int32_t num_blocks = (options.ctx + kBlockSize - 1) / kBlockSize;
  if (auto s = m->model_->AllocateKvCache(num_blocks, kBlockSize, options.kv_dtype); !s.ok()) return s;
  for (int32_t i = 0; i < num_blocks; ++i) m->blocks_.push_back(i);
  return m;
}

absl::StatusOr<int32_t> EvalModel::Step(std::span<const int32_t> chunk, int32_t begin, int32_t end,
                                        int32_t score_begin, int32_t score_end,
                                        std::vector<float>* logits) {
  if (begin < 0 || end <= begin || end > int32_t(chunk.size()) || end > options_.ctx ||
      end - begin > options_.batch) {
    return absl::InternalError("evaluation step outside the reserved chunk");
  }
  const int32_t n = end - begin;
  StepBatch batch;
  batch.token_ids.assign(chunk.begin() + begin, chunk.begin() + end);
  for (int32_t i = 0; i < n; ++i) {
    batch.positions.push_back(begin + i);
    batch.attention.slot_mapping.push_back(begin + i);  // block b holds positions 16b..16b+15
  }
  batch.attention.seqs.push_back({0, n, end, blocks_.data()});
  batch.attention.num_tokens = n;
  batch.attention.block_size = kBlockSize;
  batch.attention.max_q_len = n;
  batch.attention.max_kv_len = end;
  const int32_t lo = std::max(begin, score_begin), hi = std::min(end, score_end);
  for (int32_t p = lo; p < hi; ++p) batch.sample_rows.push_back(p - begin);
  const size_t vocab = static_cast<size_t>(vocab_size());
  logits->resize(batch.sample_rows.size() * vocab);
  absl::Status s = model_->Forward(batch, *logits);
  if (absl::Status device = model_->backend().ConsumeError(); s.ok()) s = device;
  if (!s.ok()) return s;
  return lo;
}

absl::Status CheckSameVocab(const Tokenizer& a, const Tokenizer& b) {
  if (a.vocab_size() != b.vocab_size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the models' vocabularies differ: ", a.vocab_size(), " vs ", b.vocab_size(), " tokens"));
  }
  for (TokenId id = 0; id < a.vocab_size(); ++id) {
    if (a.TokenText(id) != b.TokenText(id)) {
      return absl::FailedPreconditionError(absl::StrCat("the models' vocabularies differ at token ",
                                                        id, ": '", a.TokenText(id), "' vs '",
                                                        b.TokenText(id), "'"));
    }
  }
  // The text is tokenized once, by the base model's tokenizer: with every
  // token's text the same, the ids mean the same to both models whatever
  // kind of tokenizer file each came with (a GGUF vocabulary, or a
  // tokenizer.json that tessera-quantize turned into one).
  if (a.bos_id() != b.bos_id() || a.add_bos() != b.add_bos()) {
    return absl::FailedPreconditionError(
        "the models' tokenizers differ (BOS token or add-BOS setting)");
  }
  return absl::OkStatus();
}

}  // namespace tessera::eval
