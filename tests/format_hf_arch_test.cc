// Per-family tensor tables against gguf-py's TensorNameMap (reference data),
// and GGUF → folder → view round trips of qwen2, qwen3, phi3 and gemma3
// models, with gemma's norms checked as w in the folder and 1 + w in GGUF.
#include <cstring>
#include <set>

#include "engine/format/hf_config.h"
#include "engine/format/hf_model.h"
#include "engine/format/hf_tensors.h"
#include "engine/format/hf_writer.h"
#include "engine/format/safetensors.h"
#include "gtest/gtest.h"
#include "testing/engine_harness.h"
#include "testing/hf_folder.h"

namespace tessera {
namespace {

using json = nlohmann::json;

json Config(const std::string& model_type) {
  json c = {{"model_type", model_type}, {"hidden_size", 32},
            {"num_hidden_layers", 2},   {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"intermediate_size", 48},
            {"vocab_size", 40},         {"max_position_embeddings", 64},
            {"rms_norm_eps", 1e-6},     {"tie_word_embeddings", false}};
  if (model_type == "gemma3_text") {
    c["head_dim"] = 8;
    c["sliding_window"] = 16;
    c["query_pre_attn_scalar"] = 8;
    c["final_logit_softcapping"] = 30.0;  // written back by the folder writer
  }
  if (model_type == "qwen3") c["head_dim"] = 8;
  return c;
}

class HfArchTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfArchTest, TensorNamesMatchGgufPy) {
  const json ref =
      json::parse(testing::ReadFile(testing::SourcePath("tests/data/hf/tensor_names.json")));
  auto m = ParseHfConfig(Config(GetParam()).dump());
  ASSERT_TRUE(m.ok()) << m.status();
  std::set<std::pair<std::string, std::string>> got, want;
  for (const HfTensorSpec& s : HfTensorSpecs(*m)) got.insert({s.hf_name, s.gguf_name});
  for (const auto& p : ref[GetParam()]) {
    want.insert({p[0].get<std::string>(), p[1].get<std::string>()});
  }
  EXPECT_EQ(got, want);
}

// A GGUF model of the family: the config's keys, every tensor of the
// family's table with patterned bytes (F32 norms hold exact values).
std::unique_ptr<GgufFile> FamilyGguf(const HfModelConfig& m) {
  GgufWriter w;
  for (const auto& [key, value] : m.metadata) w.SetValue(key, value);
  uint32_t salt = 1;
  for (const HfTensorSpec& s : HfTensorSpecs(m)) {
    const GgmlType type = s.f32 ? GgmlType::kF32 : GgmlType::kBF16;
    const uint64_t n = *GgmlTensorBytes(s.dims, type) / GgmlTypeSize(type);
    std::vector<uint8_t> bytes(n * GgmlTypeSize(type));
    for (uint64_t i = 0; i < n; ++i) {
      if (type == GgmlType::kF32) {
        const float v = 1.0f + static_cast<float>((i * 7 + salt) % 16) / 8.0f;
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      } else {
        const uint16_t v = static_cast<uint16_t>(0x3c00 + (i * 31 + salt * 17) % 0x400);
        std::memcpy(bytes.data() + 2 * i, &v, 2);
      }
    }
    ++salt;
    w.AddTensor(s.gguf_name, s.dims, type, std::move(bytes));
  }
  auto file = GgufFile::FromBytes(w.Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  return std::move(*file);
}

TEST_P(HfArchTest, RoundTripsThroughAFolder) {
  auto m = ParseHfConfig(Config(GetParam()).dump());
  ASSERT_TRUE(m.ok()) << m.status();
  auto gguf = FamilyGguf(*m);
  testing::TempDir dir;
  ASSERT_TRUE(WriteHfFolder(*gguf, dir.path(), {}).ok());
  auto view = OpenHfWeights(dir.path());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ((*view)->metadata().size(), gguf->metadata().size());
  for (const auto& [key, value] : gguf->metadata()) {
    const GgufValue* v = (*view)->FindValue(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_TRUE(v->type == value.type && v->value == value.value) << key;
  }
  ASSERT_EQ((*view)->tensors().size(), gguf->tensors().size());
  for (const GgufTensorInfo& t : gguf->tensors()) {
    const GgufTensorInfo* v = (*view)->FindTensor(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    ASSERT_EQ(v->num_bytes, t.num_bytes) << t.name;
    EXPECT_EQ(v->type, t.type) << t.name;
    EXPECT_EQ(std::memcmp(v->data, t.data, t.num_bytes), 0) << t.name;
  }
  // The folder holds w where GGUF holds 1 + w (gemma), w itself otherwise.
  auto st = SafetensorsFile::Open(dir / "model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status();
  float hf = 0, gg = 0;
  std::memcpy(&hf, (*st)->Find("model.layers.1.input_layernorm.weight")->data, 4);
  std::memcpy(&gg, gguf->FindTensor("blk.1.attn_norm.weight")->data, 4);
  EXPECT_EQ(hf, m->arch->norm_plus_one ? gg - 1.0f : gg);
}

// Gemma 3 27B's shape: 62 layers, whose query_pre_attn_scalar is
// hidden / heads (12 here), not head_dim (8), as llama.cpp takes it from a
// GGUF file. The folder reader accepts it, the writer writes it back, and
// head_dim is refused for that shape.
TEST(HfArch, Gemma3WithSixtyTwoLayersScalesByHiddenOverHeads) {
  json c = Config("gemma3_text");
  c["num_hidden_layers"] = 62;
  c["hidden_size"] = 48;
  c["query_pre_attn_scalar"] = 12;
  auto m = ParseHfConfig(c.dump());
  ASSERT_TRUE(m.ok()) << m.status();
  auto gguf = FamilyGguf(*m);
  testing::TempDir dir;
  ASSERT_TRUE(WriteHfFolder(*gguf, dir.path(), {}).ok());
  const json written = json::parse(testing::ReadFile(dir / "config.json"));
  EXPECT_EQ(written["query_pre_attn_scalar"], 12);
  auto view = OpenHfWeights(dir.path());
  ASSERT_TRUE(view.ok()) << view.status();
  c["query_pre_attn_scalar"] = 8;
  auto refused = ParseHfConfig(c.dump());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("differs from 12"), std::string::npos)
      << refused.status();
  c["num_hidden_layers"] = 26;  // Gemma 3 1B: head_dim
  EXPECT_TRUE(ParseHfConfig(c.dump()).ok());
}

INSTANTIATE_TEST_SUITE_P(Families, HfArchTest,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "phi3",
                                           "gemma3_text"));

}  // namespace
}  // namespace tessera
