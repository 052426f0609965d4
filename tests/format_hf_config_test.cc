// config.json → GGUF metadata: the keys convert_hf_to_gguf.py writes, and a
// clear refusal for every malformed or unsupported config.
#include <string>

#include "engine/format/hf_config.h"
#include "engine/format/hf_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/engine_harness.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

json LlamaConfig() {
  return json{{"model_type", "llama"},    {"hidden_size", 64},
              {"num_hidden_layers", 2},   {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"intermediate_size", 128},
              {"vocab_size", 300},        {"max_position_embeddings", 512},
              {"rms_norm_eps", 1e-5},     {"rope_theta", 500000.0},
              {"hidden_act", "silu"},     {"tie_word_embeddings", false}};
}

uint64_t U(const HfModelConfig& m, const std::string& key) {
  return std::get<uint64_t>(m.metadata.at(key).value);
}
double F(const HfModelConfig& m, const std::string& key) {
  return std::get<double>(m.metadata.at(key).value);
}

TEST(HfConfig, LlamaKeysAsTheConverterWritesThem) {
  auto m = ParseHfConfig(LlamaConfig().dump());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(std::get<std::string>(m->metadata.at("general.architecture").value), "llama");
  EXPECT_EQ(U(*m, "llama.context_length"), 512u);
  EXPECT_EQ(U(*m, "llama.embedding_length"), 64u);
  EXPECT_EQ(U(*m, "llama.block_count"), 2u);
  EXPECT_EQ(U(*m, "llama.feed_forward_length"), 128u);
  EXPECT_EQ(U(*m, "llama.attention.head_count"), 4u);
  EXPECT_EQ(U(*m, "llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(U(*m, "llama.rope.dimension_count"), 16u);
  EXPECT_EQ(U(*m, "llama.vocab_size"), 300u);
  EXPECT_EQ(F(*m, "llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(F(*m, "llama.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));
  EXPECT_EQ(m->metadata.at("llama.attention.layer_norm_rms_epsilon").type, GgufValueType::kFloat32);
  EXPECT_EQ(m->metadata.count("llama.attention.key_length"), 0u);  // no head_dim in config
  EXPECT_TRUE(m->extra_tensors.empty());
  EXPECT_FALSE(m->tied);
}

TEST(HfConfig, Llama3RopeScalingBecomesRopeFreqs) {
  const json ref =
      json::parse(testing::ReadFile(testing::SourcePath("tests/data/hf/reference.json")));
  const json& r = ref["llama3"];
  json c = LlamaConfig();
  c["hidden_size"] = 256;
  c["rope_theta"] = r["rope_theta"];
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", r["factor"]},
                       {"low_freq_factor", r["low_freq_factor"]},
                       {"high_freq_factor", r["high_freq_factor"]},
                       {"original_max_position_embeddings", r["original_max_position_embeddings"]}};
  auto m = ParseHfConfig(c.dump());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->extra_tensors.count("rope_freqs.weight"), 1u);
  const std::vector<float>& got = m->extra_tensors.at("rope_freqs.weight");
  const auto want = r["factors"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << i;
  }
  EXPECT_EQ(m->metadata.count("llama.rope.scaling.type"), 0u);
}

TEST(HfConfig, OtherFamilies) {
  json q = LlamaConfig();
  q["model_type"] = "qwen3";
  q["head_dim"] = 32;
  q["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 256}};
  auto m = ParseHfConfig(q.dump());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(U(*m, "qwen3.attention.key_length"), 32u);
  EXPECT_EQ(U(*m, "qwen3.attention.value_length"), 32u);
  EXPECT_EQ(std::get<std::string>(m->metadata.at("qwen3.rope.scaling.type").value), "yarn");
  EXPECT_EQ(F(*m, "qwen3.rope.scaling.factor"), 4.0);
  EXPECT_EQ(U(*m, "qwen3.rope.scaling.original_context_length"), 256u);
  json g = LlamaConfig();
  g["model_type"] = "gemma3_text";
  g.erase("hidden_act");
  g.erase("tie_word_embeddings");  // gemma ties by default
  g["head_dim"] = 16;
  g["sliding_window"] = 128;
  g["query_pre_attn_scalar"] = 16;
  auto gm = ParseHfConfig(g.dump());
  ASSERT_TRUE(gm.ok()) << gm.status();
  EXPECT_EQ(U(*gm, "gemma3.attention.sliding_window"), 128u);
  EXPECT_TRUE(gm->tied);
  EXPECT_EQ(gm->metadata.count("gemma3.final_logit_softcapping"), 0u);
  g["final_logit_softcapping"] = 30.0;
  auto capped = ParseHfConfig(g.dump());
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(F(*capped, "gemma3.final_logit_softcapping"), 30.0);
  json p = LlamaConfig();
  p["model_type"] = "phi3";
  p["sliding_window"] = 2047;
  p["original_max_position_embeddings"] = 4096;
  auto pm = ParseHfConfig(p.dump());
  ASSERT_TRUE(pm.ok()) << pm.status();
  EXPECT_EQ(U(*pm, "phi3.attention.sliding_window"), 2047u);
  EXPECT_EQ(U(*pm, "phi3.rope.scaling.original_context_length"), 4096u);
  EXPECT_EQ(U(*pm, "phi3.rope.dimension_count"), 16u);
  // Phi-3.5's long-rope: both factor sets, and sqrt(1 + ln(s) / ln(orig))
  // for s = 4096 / 1024 as convert_hf_to_gguf.py computes it.
  p["max_position_embeddings"] = 4096;
  p["original_max_position_embeddings"] = 1024;
  p["rope_scaling"] = {{"type", "longrope"},
                       {"long_factor", std::vector<double>(8, 3.0)},
                       {"short_factor", std::vector<double>(8, 1.5)}};
  auto lr = ParseHfConfig(p.dump());
  ASSERT_TRUE(lr.ok()) << lr.status();
  EXPECT_EQ(lr->extra_tensors.at("rope_factors_long.weight"), std::vector<float>(8, 3.0f));
  EXPECT_EQ(lr->extra_tensors.at("rope_factors_short.weight"), std::vector<float>(8, 1.5f));
  EXPECT_NEAR(F(*lr, "phi3.rope.scaling.attn_factor"),
              std::sqrt(1.0 + std::log(4.0) / std::log(1024.0)), 1e-6);
}

// gemma-3-4b-it's config.json: its text_config leaves out what equals
// transformers' Gemma3TextConfig defaults (heads, head_dim, rope_theta...).
TEST(HfConfig, Gemma3MultimodalIsReadAsItsTextModel) {
  const json c = {
      {"architectures", {"Gemma3ForConditionalGeneration"}},
      {"model_type", "gemma3"},
      {"eos_token_id", {1, 106}},
      {"text_config",
       {{"hidden_size", 2560}, {"intermediate_size", 10240}, {"model_type", "gemma3_text"},
        {"num_hidden_layers", 34}, {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}},
        {"sliding_window", 1024}}},
      {"vision_config", {{"model_type", "siglip_vision_model"}}}};
  auto m = ParseHfConfig(c.dump());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->gemma3_multimodal);
  EXPECT_EQ(m->arch->model_type, "gemma3_text");
  EXPECT_EQ(U(*m, "gemma3.attention.head_count"), 8u);
  EXPECT_EQ(U(*m, "gemma3.attention.head_count_kv"), 4u);
  EXPECT_EQ(U(*m, "gemma3.attention.key_length"), 256u);
  EXPECT_EQ(U(*m, "gemma3.vocab_size"), 262208u);
  EXPECT_EQ(U(*m, "gemma3.attention.sliding_window"), 1024u);
  EXPECT_EQ(F(*m, "gemma3.rope.freq_base"), 1e6);
  EXPECT_EQ(F(*m, "gemma3.rope.scaling.factor"), 8.0);
  EXPECT_TRUE(m->tied);
  EXPECT_EQ(Gemma3TextTensorName("language_model.model.layers.3.mlp.up_proj.weight"),
            "model.layers.3.mlp.up_proj.weight");
  EXPECT_EQ(Gemma3TextTensorName("model.language_model.norm.weight"), "model.norm.weight");
  EXPECT_EQ(Gemma3TextTensorName("vision_tower.vision_model.head.weight"), "");
  json bad = c;
  bad.erase("text_config");
  EXPECT_FALSE(ParseHfConfig(bad.dump()).ok());
  bad = c;
  bad["text_config"]["model_type"] = "siglip_text_model";
  EXPECT_EQ(ParseHfConfig(bad.dump()).status().code(), absl::StatusCode::kUnimplemented);
}

// MistralForCausalLM is read as llama. v0.1's window (4096 of 32768) binds
// only past 4096 tokens: the context stops there. v0.2 and later have none.
TEST(HfConfig, MistralIsLlamaWithTheContextCutAtItsWindow) {
  json c = LlamaConfig();
  c["model_type"] = "mistral";
  c["max_position_embeddings"] = 32768;
  c["sliding_window"] = 4096;
  auto m = ParseHfConfig(c.dump());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(std::get<std::string>(m->metadata.at("general.architecture").value), "llama");
  EXPECT_TRUE(m->arch->permute_qk);
  EXPECT_EQ(U(*m, "llama.context_length"), 4096u);
  c["sliding_window"] = nullptr;
  auto full = ParseHfConfig(c.dump());
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(U(*full, "llama.context_length"), 32768u);
  c["sliding_window"] = -1;
  EXPECT_FALSE(ParseHfConfig(c.dump()).ok());
}

// transformers' layer_types, where it says what the engine computes: every
// layer full, or Gemma 3's five sliding layers to one full.
TEST(HfConfig, LayerTypesOfTheComputedPatternLoad) {
  json q = LlamaConfig();
  q["model_type"] = "qwen3";
  q["layer_types"] = {"full_attention", "full_attention"};
  auto qm = ParseHfConfig(q.dump());
  EXPECT_TRUE(qm.ok()) << qm.status();
  json g = LlamaConfig();
  g["model_type"] = "gemma3_text";
  g.erase("hidden_act");
  g["sliding_window"] = 128;
  g["num_hidden_layers"] = 12;
  g["layer_types"] = json::array();
  for (int i = 0; i < 12; ++i) {
    g["layer_types"].push_back(i % 6 == 5 ? "full_attention" : "sliding_attention");
  }
  auto gm = ParseHfConfig(g.dump());
  EXPECT_TRUE(gm.ok()) << gm.status();
}

struct BadConfig {
  const char* name;
  std::function<void(json&)> edit;
  const char* error;
};

class HfConfigBad : public ::testing::TestWithParam<BadConfig> {};

TEST_P(HfConfigBad, IsRefused) {
  json c = LlamaConfig();
  GetParam().edit(c);
  auto m = ParseHfConfig(c.dump());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Configs, HfConfigBad,
    ::testing::Values(
        BadConfig{"MissingModelType", [](json& c) { c.erase("model_type"); },
                  "\"model_type\" is missing"},
        BadConfig{"UnknownModelType", [](json& c) { c["model_type"] = "mamba"; },
                  "model_type \"mamba\" is not supported"},
        BadConfig{"ModelTypeNotString", [](json& c) { c["model_type"] = 3; }, "must be a string"},
        BadConfig{"MissingHidden", [](json& c) { c.erase("hidden_size"); },
                  "\"hidden_size\" is missing"},
        BadConfig{"MissingLayers", [](json& c) { c.erase("num_hidden_layers"); },
                  "\"num_hidden_layers\" is missing"},
        BadConfig{"MissingVocab", [](json& c) { c.erase("vocab_size"); },
                  "\"vocab_size\" is missing"},
        BadConfig{"MissingEps", [](json& c) { c.erase("rms_norm_eps"); },
                  "\"rms_norm_eps\" is missing"},
        BadConfig{"MissingContext", [](json& c) { c.erase("max_position_embeddings"); },
                  "\"max_position_embeddings\" is missing"},
        BadConfig{"HiddenString", [](json& c) { c["hidden_size"] = "64"; },
                  "must be a positive integer"},
        BadConfig{"HiddenFloat", [](json& c) { c["hidden_size"] = 64.5; },
                  "must be a positive integer"},
        BadConfig{"HiddenBool", [](json& c) { c["hidden_size"] = true; },
                  "must be a positive integer"},
        BadConfig{"HiddenNegative", [](json& c) { c["hidden_size"] = -64; },
                  "must be a positive integer"},
        BadConfig{"HiddenZero", [](json& c) { c["hidden_size"] = 0; }, "out of range"},
        BadConfig{"HiddenAbsurd", [](json& c) { c["hidden_size"] = uint64_t{1} << 40; },
                  "out of range"},
        BadConfig{"VocabAbsurd", [](json& c) { c["vocab_size"] = uint64_t{1} << 30; },
                  "out of range"},
        BadConfig{"HeadsDoNotDivide",
                  [](json& c) {
                    c["num_attention_heads"] = 5;
                    c["num_key_value_heads"] = 5;
                  },
                  "does not divide hidden_size"},
        BadConfig{"KvHeadsDoNotDivide", [](json& c) { c["num_key_value_heads"] = 3; },
                  "does not divide num_attention_heads"},
        BadConfig{"KvHeadsMoreThanHeads", [](json& c) { c["num_key_value_heads"] = 8; },
                  "does not divide num_attention_heads"},
        BadConfig{"OddHeadDim", [](json& c) { c["head_dim"] = 15; }, "must be even"},
        BadConfig{"EpsNegative", [](json& c) { c["rms_norm_eps"] = -1e-5; }, "must be in (0, 1)"},
        BadConfig{"EpsString", [](json& c) { c["rms_norm_eps"] = "1e-5"; }, "must be a number"},
        BadConfig{"ThetaZero", [](json& c) { c["rope_theta"] = 0; }, "must be positive"},
        BadConfig{"TieNotBool", [](json& c) { c["tie_word_embeddings"] = 1; },
                  "must be true or false"},
        BadConfig{"RopeDynamic",
                  [](json& c) {
                    c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
                  },
                  "rope_scaling type \"dynamic\" is not supported"},
        BadConfig{"RopeYarnForLlama",
                  [](json& c) {
                    c["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}};
                  },
                  "rope_scaling type \"yarn\" is not supported for llama"},
        BadConfig{"RopeNoType",
                  [](json& c) {
                    c["rope_scaling"] = {{"factor", 2.0}};
                  },
                  "no \"rope_type\""},
        BadConfig{"RopeNotObject", [](json& c) { c["rope_scaling"] = 2.0; },
                  "rope_scaling is not an object"},
        BadConfig{"RopeLinearNoFactor",
                  [](json& c) {
                    c["rope_scaling"] = {{"rope_type", "linear"}};
                  },
                  "no factor"},
        BadConfig{"RopeLlama3EqualFactors",
                  [](json& c) {
                    c["rope_scaling"] = {{"rope_type", "llama3"},
                                         {"low_freq_factor", 2.0},
                                         {"high_freq_factor", 2.0}};
                  },
                  "equals high_freq_factor"},
        BadConfig{"PhiLongropeShortFactors",
                  [](json& c) {
                    c["model_type"] = "phi3";
                    c["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {1.0}}};
                  },
                  "\"long_factor\" must be an array of head_dim / 2 = 8 numbers"},
        BadConfig{"PhiLongropeMscale",
                  [](json& c) {
                    c["model_type"] = "phi3";
                    c["rope_scaling"] = {{"type", "longrope"}, {"long_mscale", 1.2}};
                  },
                  "\"long_mscale\" is not supported"},
        BadConfig{"PhiLongropeWithoutOriginalContext",
                  [](json& c) {
                    c["model_type"] = "phi3";
                    c["rope_scaling"] = {{"type", "longrope"},
                                         {"long_factor", std::vector<double>(8, 2.0)},
                                         {"short_factor", std::vector<double>(8, 1.0)}};
                  },
                  "needs original_max_position_embeddings"},
        BadConfig{"LlamaLongrope",
                  [](json& c) { c["rope_scaling"] = {{"type", "longrope"}}; },
                  "rope_scaling type \"longrope\" is not supported for llama"},
        BadConfig{"AttentionBias", [](json& c) { c["attention_bias"] = true; },
                  "\"attention_bias\": true is not supported"},
        BadConfig{"MlpBias", [](json& c) { c["mlp_bias"] = true; },
                  "\"mlp_bias\": true is not supported"},
        BadConfig{"QwenSlidingWindow",
                  [](json& c) {
                    c["model_type"] = "qwen2";
                    c["use_sliding_window"] = true;
                  },
                  "\"use_sliding_window\": true"},
        BadConfig{"GeluLlama", [](json& c) { c["hidden_act"] = "gelu"; },
                  "activation \"gelu\" is not supported"},
        BadConfig{"GemmaAttentionSoftcap",
                  [](json& c) {
                    c["model_type"] = "gemma3_text";
                    c.erase("hidden_act");
                    c["sliding_window"] = 4;
                    c["attn_logit_softcapping"] = 50.0;
                  },
                  "\"attn_logit_softcapping\" is not supported"},
        BadConfig{"GemmaNegativeSoftcap",
                  [](json& c) {
                    c["model_type"] = "gemma3_text";
                    c.erase("hidden_act");
                    c["sliding_window"] = 4;
                    c["final_logit_softcapping"] = -3.0;
                  },
                  "must be a positive number or null"},
        BadConfig{"GemmaNoWindow",
                  [](json& c) {
                    c["model_type"] = "gemma3_text";
                    c.erase("hidden_act");
                  },
                  "\"sliding_window\" is missing"},
        BadConfig{"GemmaQueryScalar",
                  [](json& c) {
                    c["model_type"] = "gemma3_text";
                    c.erase("hidden_act");
                    c["sliding_window"] = 4;
                    c["head_dim"] = 16;
                    c["query_pre_attn_scalar"] = 20;
                  },
                  "\"query_pre_attn_scalar\" = 20 differs"},
        BadConfig{"LlamaSlidingLayer",
                  [](json& c) {
                    const uint32_t n = c["num_hidden_layers"].get<uint32_t>();
                    c["layer_types"] = json(std::vector<std::string>(n, "full_attention"));
                    c["layer_types"][0] = "sliding_attention";
                  },
                  "\"layer_types\"[0] = \"sliding_attention\" is not supported for llama"},
        BadConfig{"LayerTypesWrongLength",
                  [](json& c) { c["layer_types"] = json::array({"full_attention"}); },
                  "one string per layer"},
        BadConfig{"GemmaOtherLayerPattern",
                  [](json& c) {
                    c["model_type"] = "gemma3_text";
                    c.erase("hidden_act");
                    c["sliding_window"] = 4;
                    c["num_hidden_layers"] = 6;
                    c["layer_types"] = json(std::vector<std::string>(6, "sliding_attention"));
                  },
                  "\"layer_types\"[5] = \"sliding_attention\" is not supported for gemma3_text "
                  "(this layer must be \"full_attention\")"},
        BadConfig{"NotAnObject", [](json& c) { c = json::array({1}); }, "is not a JSON object"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(HfConfig, DuplicateKeyAndInvalidJsonAreRefused) {
  std::string text = LlamaConfig().dump();
  text.insert(1, R"("hidden_size":32,)");
  auto m = ParseHfConfig(text);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("duplicate key \"hidden_size\""));
  auto bad = ParseHfConfig("{\"model_type\": \"llama\",");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("invalid JSON"));
}

TEST(GenerationConfig, EosIsAnIntOrAList) {
  auto one = ParseGenerationEos(R"({"eos_token_id": 2})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<int32_t>{2}));
  auto list =
      ParseGenerationEos(R"({"bos_token_id": 1, "eos_token_id": [128001, 128008, 128009]})");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<int32_t>{128001, 128008, 128009}));
  auto none = ParseGenerationEos(R"({"temperature": 0.6})");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(ParseGenerationEos(R"({"eos_token_id": -1})").ok());
  EXPECT_FALSE(ParseGenerationEos(R"({"eos_token_id": ["2"]})").ok());
  EXPECT_FALSE(ParseGenerationEos(R"({"eos_token_id": 2.5})").ok());
}

}  // namespace
}  // namespace tessera
