// tessera-load-bench PATH [THREADS [CPU_MATMUL]]: time from nothing to the
// first token's logits for a GGUF file or a Hugging Face folder, in phases:
// opening and validating the model (for a folder: config.json, safetensors
// headers, the in-memory GGUF view), Model::Load (weights prepared on the
// CPU backend, with --cpu-matmul CPU_MATMUL, default auto as the server's),
// and one forward step of a 1-token prompt. Tokenizer construction is not
// included. Prints the phases' end times in seconds, on one line.
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: tessera-load-bench MODEL(.gguf|folder) [THREADS [auto|f32|bf16]]\n");
    return 2;
  }
  int threads = 0;
  if (argc > 2 && !absl::SimpleAtoi(argv[2], &threads)) return 2;
  const auto t0 = Clock::now();
  struct stat st;
  const bool folder = stat(argv[1], &st) == 0 && S_ISDIR(st.st_mode);
  auto file = folder ? tessera::OpenHfWeights(argv[1]) : tessera::GgufFile::Open(argv[1]);
  if (!file.ok()) return Fail(file.status());
  const double open_s = Since(t0);
  std::string matmul = argc > 3 ? argv[3] : "auto";
  // As the server resolves auto for a model of 16-bit weights.
  if (matmul == "auto") matmul = tessera::CpuHasBf16Matmul() ? "bf16" : "f32";
  auto backend = tessera::CreateBackend({"cpu", threads, matmul});
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
