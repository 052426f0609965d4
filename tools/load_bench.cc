// tessera-load-bench PATH [THREADS]: time from nothing to the first token's
// logits for a GGUF file or a Hugging Face folder, in phases: opening and
// validating the model (for a folder: config.json, safetensors headers, the
// in-memory GGUF view), Model::Load (weights prepared on the CPU backend),
// and one forward step of a 1-token prompt. Tokenizer construction is not
// included. Prints one line per phase in seconds.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "engine/backend/backend.h"
#include "engine/format/hf_model.h"
#include "engine/model/model.h"

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "tessera-load-bench: %s\n", s.ToString().c_str());
  return 1;
}

// The model config reads the vocabulary size from tokenizer.ggml.tokens; a
// folder's view has none (its tokenizer is tokenizer.json), so one of
// placeholder tokens of {arch}.vocab_size entries is added, without copying
// any tensor data.
absl::StatusOr<std::unique_ptr<tessera::GgufFile>> WithPlaceholderVocab(
    std::unique_ptr<tessera::GgufFile> view) {
  auto arch = view->GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  auto vocab = view->GetUint(*arch + ".vocab_size");
  if (!vocab.ok()) return vocab.status();
  auto metadata = view->metadata();
  tessera::GgufValue tokens;
  tokens.type = tessera::GgufValueType::kArray;
  tokens.array_type = tessera::GgufValueType::kString;
  std::vector<std::string> names;
  for (uint64_t i = 0; i < *vocab; ++i) names.push_back("t" + std::to_string(i));
  tokens.value = std::move(names);
  metadata["tokenizer.ggml.tokens"] = std::move(tokens);
  auto infos = view->tensors();
  std::shared_ptr<const tessera::GgufFile> owner(std::move(view));
  return tessera::GgufFile::FromParts(std::move(metadata), std::move(infos), {owner});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tessera-load-bench MODEL(.gguf|folder) [THREADS]\n");
    return 2;
  }
  int threads = 0;
  if (argc > 2 && !absl::SimpleAtoi(argv[2], &threads)) return 2;
  const auto t0 = Clock::now();
  struct stat st;
  const bool folder = stat(argv[1], &st) == 0 && S_ISDIR(st.st_mode);
  auto file = folder ? tessera::OpenHfWeights(argv[1]) : tessera::GgufFile::Open(argv[1]);
  if (!file.ok()) return Fail(file.status());
  if (folder) file = WithPlaceholderVocab(std::move(*file));
  if (!file.ok()) return Fail(file.status());
  const double open_s = Since(t0);
  auto backend = tessera::CreateBackend({"cpu", threads, "f32"});
  if (!backend.ok()) return Fail(backend.status());
  auto model = tessera::Model::Load(**file, std::move(*backend), 16, 1);
  if (!model.ok()) return Fail(model.status());
  const double load_s = Since(t0);
  if (auto s = (*model)->AllocateKvCache(4, 16, tessera::DType::kF32); !s.ok()) return Fail(s);
  std::vector<int32_t> blocks = {0};
  tessera::StepBatch batch;
  batch.token_ids = {1};
  batch.positions = {0};
  batch.sample_rows = {0};
  batch.attention.seqs = {{0, 1, 1, blocks.data()}};
  batch.attention.slot_mapping = {0};
  batch.attention.num_tokens = 1;
  batch.attention.block_size = 16;
  batch.attention.max_q_len = 1;
  batch.attention.max_kv_len = 1;
  std::vector<float> logits((*model)->config().vocab_size);
  if (auto s = (*model)->Forward(batch, logits); !s.ok()) return Fail(s);
  const double first_s = Since(t0);
  std::printf("format=%s open=%.3f load=%.3f first_token=%.3f\n", folder ? "hf" : "gguf", open_s,
              load_s, first_s);
  return 0;
}
