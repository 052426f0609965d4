// The engine's llama and gpt2 forward passes against a plain dense
// reference, on random-weight models of several shapes and weight types.
#include <cmath>
#include <filesystem>
#include <memory>

#include "engine/backend/backend.h"
#include "engine/model/model_writer.h"
#include "gtest/gtest.h"
#include "testing/engine_harness.h"
#include "testing/gzip_file.h"
#include "testing/naive_transformer.h"
#include "testing/temp_model.h"

namespace tessera {
namespace {

struct ModelCase {
  const char* label;
  const char* arch;
  uint32_t dim, layers, heads, kv_heads, ffn;
  GgmlType dtype;
  bool tied;
  const char* vocab_file;  // under tests/data/vocab, or "" for a synthetic vocab
  float tolerance;         // max |logit difference|
  // Variants: attention.key_length, rope base, llama3 rope factors, gemma3
  // sliding window and final logit soft-capping.
  uint32_t head_dim = 0;
  float rope_base = 0.0f;
  const char* rope_scaling = "";
  uint32_t window = 0;
  float softcap = 0.0f;
};

std::string WriteModel(const ModelCase& c) {
  RandomModelSpec spec;
  spec.arch = c.arch;
  spec.dim = c.dim;
  spec.layers = c.layers;
  spec.heads = c.heads;
  spec.kv_heads = c.kv_heads;
  spec.ffn = c.ffn;
  spec.context = 256;
  spec.dtype = c.dtype;
  spec.tied = c.tied;
  spec.seed = 42;
  spec.head_dim = c.head_dim;
  if (c.rope_base > 0) spec.rope_base = c.rope_base;
  spec.rope_scaling = c.rope_scaling;
  spec.sliding_window = c.window;
  if (c.softcap > 0) spec.logit_softcap = c.softcap;
  spec.output_std = 0.5f;  // peaked next-token distributions
  std::unique_ptr<GgufFile> vocab;
  if (*c.vocab_file) {
    const std::string rel = std::string("tests/data/vocab/") + c.vocab_file;
    vocab = *GgufFile::Open(testing::UnpackedPath(testing::SourcePath(rel)));
    spec.vocab_from = vocab.get();
  } else {
    spec.vocab_size = 300;
  }
  return testing::WriteTempModel(spec, std::string("ref-") + c.label);
}

// Runs one case with the given CPU matrix products and returns, per prompt,
// the largest logit difference and the logits' spread.
class ModelReference : public ::testing::TestWithParam<std::tuple<ModelCase, std::string>> {};

TEST_P(ModelReference, LogitsMatchDenseReference) {
  const ModelCase c = std::get<0>(GetParam());
  const std::string matmul = std::get<1>(GetParam());
  if (matmul == "bf16" && !CpuHasBf16Matmul()) GTEST_SKIP() << "no bf16 kernel on this CPU";
  // bf16 products round weights and activations to 8 significant bits (a
  // relative error of up to 2^-9 in every operand): on these cases,
  // logits whose spread is 9 to 60 move by up to 0.073 with AVX512-BF16.
  // A wrong layout or pair order moves them by the order of the spread.
  const float tolerance = matmul == "bf16" ? 0.1f : c.tolerance;
  const std::string path = WriteModel(c);
  EngineOptions options;
  options.model_path = path;
  options.device = "cpu";
  options.cpu_matmul = matmul;
  options.num_threads = 2;
  options.max_num_seqs = 8;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  testing::NaiveTransformer reference(**file);
  const std::vector<std::vector<int32_t>> prompts = {
      {5}, {17, 3, 250, 9, 100, 42, 7}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}};
  for (const auto& prompt : prompts) {
    auto got = (*engine)->DebugPromptLogits(prompt);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<double> want = reference.LastLogits(prompt);
    ASSERT_EQ(got->size(), want.size());
    double max_diff = 0, spread = 0;
    size_t got_top = 0, want_top = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs((*got)[i] - want[i]));
      spread = std::max(spread, std::fabs(want[i] - want[0]));
      if ((*got)[i] > (*got)[got_top]) got_top = i;
      if (want[i] > want[want_top]) want_top = i;
    }
    // The comparison means something only if the logits are far from flat.
    EXPECT_GT(spread, 1.0) << c.label;
    // f32 products: errors grow with the logits' size (the head's weights
    // are large, for peaked distributions), so the bound is relative to the
    // spread, with the case's tolerance as a floor.
    const double bound = std::max<double>(tolerance, 5e-4 * spread);
    EXPECT_LT(max_diff, bound) << c.label << " " << matmul << " prompt length "
                               << prompt.size() << " spread " << spread;
    EXPECT_EQ(got_top, want_top) << c.label << " " << matmul << " greedy token";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, ModelReference,
    ::testing::Combine(::testing::Values(
        ModelCase{"llama_f32_gqa", "llama", 64, 2, 8, 2, 160, GgmlType::kF32, false, "", 1e-3f},
        ModelCase{"llama_f16_tied", "llama", 128, 2, 4, 4, 256, GgmlType::kF16, true, "", 1e-3f},
        ModelCase{"llama_bf16_mqa", "llama", 96, 1, 6, 1, 200, GgmlType::kBF16, false, "", 1e-3f},
        ModelCase{"llama_spm_vocab", "llama", 64, 1, 4, 2, 128, GgmlType::kF32, false,
                  "ggml-vocab-llama-spm.gguf", 1e-3f},
        ModelCase{"gpt2_f32_vocab", "gpt2", 64, 2, 4, 4, 256, GgmlType::kF32, true,
                  "ggml-vocab-gpt-2.gguf", 1e-3f},
        ModelCase{"gpt2_f16_untied", "gpt2", 128, 2, 8, 8, 512, GgmlType::kF16, false, "", 1e-3f},
        ModelCase{"llama3_rope_freqs", "llama", 64, 2, 4, 2, 128, GgmlType::kF32, true, "", 2e-3f,
                  32, 500000.0f, "llama3"},
        ModelCase{"qwen2_bias_gqa", "qwen2", 64, 2, 4, 2, 160, GgmlType::kF32, false, "", 2e-3f,
                  0, 1000000.0f},
        ModelCase{"qwen3_qk_norm", "qwen3", 64, 2, 4, 2, 160, GgmlType::kBF16, true, "", 2e-3f,
                  32, 1000000.0f},
        ModelCase{"phi3_fused", "phi3", 96, 2, 4, 4, 160, GgmlType::kF16, false, "", 2e-3f},
        ModelCase{"gemma3_swa", "gemma3", 64, 7, 4, 1, 128, GgmlType::kF32, true, "", 2e-3f,
                  32, 1000000.0f, "", 4},
        ModelCase{"gemma3_softcap", "gemma3", 48, 6, 2, 2, 96, GgmlType::kBF16, false, "", 5e-3f,
                  64, 0.0f, "", 3, 5.0f}),
                       ::testing::Values("f32", "bf16")),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).label) + "_" + std::get<1>(info.param);
    });

}  // namespace
}  // namespace tessera
