// The same random-weight llama model, loaded from its GGUF file and from its
// Hugging Face folder, gives identical greedy tokens through the engine.
//
// The folder's view (OpenHfWeights) carries no vocabulary, and tokenizer.json
// tokenizers are built elsewhere; so the view is re-serialized with the
// GGUF file's tokenizer.ggml.* keys, and the engine is driven by token ids.
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/engine.h"
#include "engine/format/hf_model.h"
#include "engine/format/hf_writer.h"
#include "engine/format/safetensors.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/engine_harness.h"
#include "testing/hf_folder.h"
#include "testing/temp_model.h"

namespace tessera {
namespace {

std::vector<int32_t> Greedy(const std::string& path, const std::vector<int32_t>& prompt) {
  EngineOptions options;
  options.model_path = path;
  options.device = "cpu";
  options.num_threads = 1;
  options.cpu_matmul = "f32";
  auto engine = Engine::Create(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  auto sink = std::make_shared<testing::CollectingSink>();
  EXPECT_TRUE((*engine)->Submit(testing::GreedyRequest(1, prompt, 24), sink).ok());
  sink->Wait();
  return sink->token_ids;
}

using testing::WriteView;

TEST(HfParity, GreedyTokensMatchTheGgufModel) {
  RandomModelSpec spec = testing::SmallLlama(64, 4, 2);
  spec.vocab_size = 320;
  spec.rope_base = 10000.0f;
  const std::string gguf_path = testing::WriteTempModel(spec, "hf-parity");
  auto gguf = GgufFile::Open(gguf_path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  testing::TempDir dir;
  const std::string folder = dir / "model";
  ASSERT_TRUE(WriteHfFolder(**gguf, folder, {}).ok());
  auto view = OpenHfWeights(folder);
  ASSERT_TRUE(view.ok()) << view.status();
  const std::string view_path = WriteView(**view, **gguf, dir / "view.gguf");

  const std::vector<int32_t> prompt = {1, 57, 200, 13, 99, 310, 4};
  const std::vector<int32_t> want = Greedy(gguf_path, prompt);
  const std::vector<int32_t> got = Greedy(view_path, prompt);
  ASSERT_EQ(want.size(), 24u);
  EXPECT_EQ(got, want);
  // Random weights still pick varied tokens: the comparison is not vacuous.
  EXPECT_GT(std::set<int32_t>(want.begin(), want.end()).size(), 2u);

  // The same folder as Mistral's config.json writes it (model_type
  // "mistral", a sliding window longer than the context): the same tokens.
  nlohmann::json config;
  std::ifstream(folder + "/config.json") >> config;
  config["model_type"] = "mistral";
  config["architectures"] = {"MistralForCausalLM"};
  config["sliding_window"] = 4096;
  std::ofstream(folder + "/config.json") << config.dump();
  auto mistral = OpenHfWeights(folder);
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(Greedy(WriteView(**mistral, **gguf, dir / "mistral.gguf"), prompt), want);
}

// A Gemma 3 multimodal folder (Gemma3ForConditionalGeneration: config.json
// model_type "gemma3" with a text_config that leaves transformers' defaults
// out; the language model under "language_model.model."; a vision tower and
// projector) serves its text model: the tokens of the GGUF file.
TEST(HfParity, Gemma3MultimodalFolderServesItsTextModel) {
  RandomModelSpec spec = testing::SmallLlama(64, 4, 2);
  spec.arch = "gemma3";
  spec.head_dim = 16;
  spec.sliding_window = 8;
  spec.vocab_size = 320;
  spec.dtype = GgmlType::kF32;
  const std::string gguf_path = testing::WriteTempModel(spec, "hf-gemma3-mm");
  auto gguf = GgufFile::Open(gguf_path);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  testing::TempDir dir;
  const std::string folder = dir / "model";
  ASSERT_TRUE(WriteHfFolder(**gguf, folder, {}).ok());

  nlohmann::json text;
  std::ifstream(folder + "/config.json") >> text;
  ASSERT_EQ(text["rms_norm_eps"], 1e-6);
  text.erase("rms_norm_eps");  // the default
  text.erase("architectures");
  const nlohmann::json config = {{"model_type", "gemma3"},
                                 {"architectures", {"Gemma3ForConditionalGeneration"}},
                                 {"text_config", text},
                                 {"vision_config", {{"model_type", "siglip_vision_model"}}}};
  std::ofstream(folder + "/config.json") << config.dump();
  auto st = SafetensorsFile::Open(folder + "/model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status();
  std::vector<testing::StEntry> entries;
  for (const SafetensorsTensor& t : (*st)->tensors()) {
    entries.push_back({"language_model." + t.name, std::string(SafetensorsDtypeName(t.dtype)),
                       t.shape, std::vector<uint8_t>(t.data, t.data + (t.end - t.begin))});
  }
  for (const char* name : {"vision_tower.vision_model.post_layernorm.weight",
                           "multi_modal_projector.mm_soft_emb_norm.weight"}) {
    entries.push_back({name, "F32", {4}, std::vector<uint8_t>(16, 0)});
  }
  st->reset();
  testing::WriteSafetensors(folder + "/model.safetensors", entries);

  auto view = OpenHfWeights(folder);
  ASSERT_TRUE(view.ok()) << view.status();
  const std::vector<int32_t> prompt = {2, 57, 200, 13, 99, 310, 4};
  const std::vector<int32_t> want = Greedy(gguf_path, prompt);
  EXPECT_EQ(Greedy(WriteView(**view, **gguf, dir / "mm.gguf"), prompt), want);
  EXPECT_GT(std::set<int32_t>(want.begin(), want.end()).size(), 2u);
}

}  // namespace
}  // namespace tessera
