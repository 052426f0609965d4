// GGUF → Hugging Face folder → loaded view: byte-identical tensors and the
// same architecture keys; the HF layout matches the converter's reference;
// broken folders are refused with a message naming the fault.
#include <filesystem>
#include <set>

#include "engine/format/chat_template_source.h"
#include "engine/format/hf_model.h"
#include "engine/format/hf_writer.h"
#include "engine/format/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/engine_harness.h"
#include "testing/hf_folder.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using testing::StEntry;
using testing::TempDir;

bool SameValue(const GgufValue& a, const GgufValue& b) {
  return a.type == b.type && a.array_type == b.array_type && a.value == b.value;
}

void ExpectSameModel(const GgufFile& gguf, const GgufFile& view) {
  const std::string arch = *gguf.GetString("general.architecture");
  for (const auto& [key, value] : gguf.metadata()) {
    if (key.rfind(arch + ".", 0) != 0 && key != "general.architecture") continue;
    const GgufValue* v = view.FindValue(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_TRUE(SameValue(value, *v)) << key;
  }
  for (const auto& [key, value] : view.metadata()) {
    EXPECT_NE(gguf.FindValue(key), nullptr) << "extra key " << key;
  }
  ASSERT_EQ(gguf.tensors().size(), view.tensors().size());
  for (const GgufTensorInfo& t : gguf.tensors()) {
    const GgufTensorInfo* v = view.FindTensor(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_EQ(v->dims, t.dims) << t.name;
    EXPECT_EQ(v->type, t.type) << t.name;
    ASSERT_EQ(v->num_bytes, t.num_bytes) << t.name;
    EXPECT_EQ(std::memcmp(v->data, t.data, t.num_bytes), 0) << t.name;
  }
}

struct RoundTripCase {
  const char* name;
  bool tied;
  uint64_t shard_size;
  GgmlType dtype;
};

class HfRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(HfRoundTrip, TensorsAndKeysSurvive) {
  RandomModelSpec spec = testing::SmallLlama();
  spec.tied = GetParam().tied;
  spec.dtype = GetParam().dtype;
  spec.rope_base = 500000.0f;
  auto gguf = testing::RandomGguf(spec);
  TempDir dir;
  HfWriteOptions options;
  options.shard_size = GetParam().shard_size;
  ASSERT_TRUE(WriteHfFolder(*gguf, dir.path(), options).ok());
  EXPECT_EQ(std::filesystem::exists(dir / "model.safetensors.index.json"), options.shard_size > 0);
  if (options.shard_size > 0) {
    EXPECT_TRUE(std::filesystem::exists(dir / "model-00003-of-00012.safetensors"));
    EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  }
  auto view = OpenHfWeights(dir.path());
  ASSERT_TRUE(view.ok()) << view.status();
  ExpectSameModel(*gguf, **view);
  EXPECT_EQ((*view)->FindTensor("output.weight") == nullptr, spec.tied);
}

INSTANTIATE_TEST_SUITE_P(Folders, HfRoundTrip,
                         ::testing::Values(RoundTripCase{"Bf16", false, 0, GgmlType::kBF16},
                                           RoundTripCase{"F16Tied", true, 0, GgmlType::kF16},
                                           RoundTripCase{"F32", false, 0, GgmlType::kF32},
                                           RoundTripCase{"Bf16Sharded", false, 4000,
                                                         GgmlType::kBF16}),
                         [](const auto& info) { return std::string(info.param.name); });

// HF rows of q_proj / k_proj, in the converter's permutation, become GGUF's.
void ExpectPermutation(uint32_t dim, uint32_t heads, uint32_t kv_heads, const char* hf_name,
                       const char* gguf_name, const char* ref_key) {
  auto gguf = testing::RandomGguf(testing::SmallLlama(dim, heads, kv_heads));
  TempDir dir;
  ASSERT_TRUE(WriteHfFolder(*gguf, dir.path(), {}).ok());
  auto st = SafetensorsFile::Open(dir / "model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status();
  const SafetensorsTensor* hf = (*st)->Find(hf_name);
  const GgufTensorInfo* g = gguf->FindTensor(gguf_name);
  ASSERT_NE(hf, nullptr);
  ASSERT_NE(g, nullptr);
  const json ref =
      json::parse(testing::ReadFile(testing::SourcePath("tests/data/hf/reference.json")));
  const auto order = ref[ref_key].get<std::vector<uint64_t>>();
  ASSERT_EQ(order.size(), g->dims[1]);
  const uint64_t row = g->dims[0] * GgmlTypeSize(g->type);
  for (uint64_t i = 0; i < order.size(); ++i) {
    // permute(hf)[i] == hf[order[i]] is GGUF row i.
    EXPECT_EQ(std::memcmp(g->data + i * row, hf->data + order[i] * row, row), 0) << i;
  }
}

TEST(HfLayout, QueryRowsFollowTheConverterPermutation) {
  ExpectPermutation(24, 3, 3, "model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight",
                    "permute_q_rows_24_heads_3");
}

TEST(HfLayout, KeyRowsFollowTheConverterPermutationOverKvHeads) {
  ExpectPermutation(32, 4, 2, "model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight",
                    "permute_k_rows_16_heads_4_kv_2");
}

std::vector<StEntry> ReadEntries(const std::string& path) {
  auto st = SafetensorsFile::Open(path);
  EXPECT_TRUE(st.ok()) << st.status();
  std::vector<StEntry> out;
  for (const SafetensorsTensor& t : (*st)->tensors()) {
    out.push_back({t.name, std::string(SafetensorsDtypeName(t.dtype)), t.shape,
                   std::vector<uint8_t>(t.data, t.data + (t.end - t.begin))});
  }
  return out;
}

struct BrokenFolder {
  const char* name;
  std::function<void(const TempDir&)> edit;
  const char* error;
  uint64_t shard_size = 0;
};

class HfFolderBad : public ::testing::TestWithParam<BrokenFolder> {};

TEST_P(HfFolderBad, IsRefused) {
  auto gguf = testing::RandomGguf(testing::SmallLlama());
  TempDir dir;
  HfWriteOptions options;
  options.shard_size = GetParam().shard_size;
  ASSERT_TRUE(WriteHfFolder(*gguf, dir.path(), options).ok());
  GetParam().edit(dir);
  auto view = OpenHfWeights(dir.path());
  ASSERT_FALSE(view.ok());
  EXPECT_THAT(std::string(view.status().message()), HasSubstr(GetParam().error));
}

void EditEntries(const TempDir& d, const std::function<void(std::vector<StEntry>&)>& edit) {
  auto entries = ReadEntries(d / "model.safetensors");
  edit(entries);
  testing::WriteSafetensors(d / "model.safetensors", entries);
}

void EditConfig(const TempDir& d, const std::function<void(json&)>& edit) {
  json c = json::parse(testing::ReadFile(d / "config.json"));
  edit(c);
  testing::WriteText(d / "config.json", c.dump());
}

void EditIndex(const TempDir& d, const std::function<void(json&)>& edit) {
  json c = json::parse(testing::ReadFile(d / "model.safetensors.index.json"));
  edit(c);
  testing::WriteText(d / "model.safetensors.index.json", c.dump());
}

constexpr uint64_t kShards = 4000;  // twelve shards for SmallLlama

// The i-th shard file of the folder's index, in sorted order.
std::string Shard(const TempDir& d, size_t i) {
  json c = json::parse(testing::ReadFile(d / "model.safetensors.index.json"));
  std::set<std::string> names;
  for (const auto& [k, v] : c["weight_map"].items()) names.insert(v.get<std::string>());
  return *std::next(names.begin(), static_cast<long>(i));
}

INSTANTIATE_TEST_SUITE_P(
    Folders, HfFolderBad,
    ::testing::Values(
        BrokenFolder{"NoConfig",
                     [](const TempDir& d) { std::filesystem::remove(d / "config.json"); },
                     "config.json' is not a readable file"},
        BrokenFolder{"NoWeights",
                     [](const TempDir& d) { std::filesystem::remove(d / "model.safetensors"); },
                     "neither model.safetensors nor"},
        BrokenFolder{
            "VocabMismatch",
            [](const TempDir& d) { EditConfig(d, [](json& c) { c["vocab_size"] = 301; }); },
            "has shape [300, 32], expected [301, 32]"},
        BrokenFolder{
            "LayersMismatch",
            [](const TempDir& d) { EditConfig(d, [](json& c) { c["num_hidden_layers"] = 3; }); },
            "no tensor \"model.layers.2.input_layernorm.weight\""},
        BrokenFolder{"UntiedWithoutHead",
                     [](const TempDir& d) {
                       EditEntries(d, [](auto& e) {
                         std::erase_if(e, [](auto& t) { return t.name == "lm_head.weight"; });
                       });
                     },
                     "no tensor \"lm_head.weight\""},
        BrokenFolder{"ExtraTensor",
                     [](const TempDir& d) {
                       EditEntries(d, [](auto& e) {
                         e.push_back({"model.extra.weight", "F32", {1}, {0, 0, 0, 0}});
                       });
                     },
                     "unexpected tensor \"model.extra.weight\""},
        BrokenFolder{"IntegerDtype",
                     [](const TempDir& d) {
                       EditEntries(d, [](auto& e) {
                         for (auto& t : e) {
                           if (t.name == "model.norm.weight") {
                             t.dtype = "I32";
                           }
                         }
                       });
                     },
                     "has dtype I32; only BF16, F16 and F32"},
        BrokenFolder{"TransposedWeight",
                     [](const TempDir& d) {
                       EditEntries(d, [](auto& e) {
                         for (auto& t : e) {
                           if (t.name == "model.layers.0.mlp.down_proj.weight")
                             std::swap(t.shape[0], t.shape[1]);
                         }
                       });
                     },
                     "down_proj.weight\" has shape [48, 32], expected [32, 48]"},
        BrokenFolder{"CorruptHeader",
                     [](const TempDir& d) {
                       testing::WriteText(d / "model.safetensors", std::string(8, '\xff'));
                     },
                     "header length"},
        BrokenFolder{"MissingShard",
                     [](const TempDir& d) { std::filesystem::remove(d / Shard(d, 1)); },
                     "is missing from", kShards},
        BrokenFolder{"TensorNotInIndex",
                     [](const TempDir& d) {
                       EditIndex(d, [&](json& c) { c["weight_map"].erase("model.norm.weight"); });
                     },
                     "index lists it nowhere", kShards},
        BrokenFolder{"TensorInWrongShard",
                     [](const TempDir& d) {
                       EditIndex(
                           d, [&](json& c) { c["weight_map"]["model.norm.weight"] = Shard(d, 0); });
                     },
                     "but the index lists it in model-00001-of-00012.safetensors", kShards},
        BrokenFolder{"IndexedTensorAbsent",
                     [](const TempDir& d) {
                       EditIndex(d, [&](json& c) {
                         c["weight_map"]["model.ghost.weight"] = Shard(d, 0);
                       });
                     },
                     "index lists tensor \"model.ghost.weight\"", kShards},
        BrokenFolder{"IndexPathTraversal",
                     [](const TempDir& d) {
                       EditIndex(d, [&](json& c) {
                         c["weight_map"]["model.norm.weight"] = "../" + Shard(d, 0);
                       });
                     },
                     "not a plain file name", kShards},
        BrokenFolder{"TensorInTwoShards",
                     [](const TempDir& d) {
                       const std::string a = d / Shard(d, 0);
                       auto entries = ReadEntries(a);
                       auto other = ReadEntries(d / Shard(d, 11));
                       entries.push_back(other.back());
                       testing::WriteSafetensors(a, entries);
                     },
                     "is in both", kShards}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ModelSource, OpensAGgufFileOrAFolder) {
  auto gguf = testing::RandomGguf(testing::SmallLlama());
  TempDir dir;
  HfWriteOptions options;
  testing::WriteText(dir / "tok.json", R"({"model": {"type": "BPE"}})");
  testing::WriteText(dir / "tok_config.json", R"({"add_bos_token": true})");
  options.tokenizer_json = dir / "tok.json";
  options.tokenizer_config = dir / "tok_config.json";
  const std::string folder = dir / "model";
  ASSERT_TRUE(WriteHfFolder(*gguf, folder, options).ok());
  // With a tokenizer.json of its own, the folder's generation_config.json
  // names no ids of the model's placeholder vocabulary.
  auto written = OpenModelSource(folder);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(written->eos_token_ids.empty());
  testing::WriteText(folder + "/generation_config.json", R"({"eos_token_id": [2, 7]})");
  auto src = OpenModelSource(folder);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ(src->format, "hf");
  EXPECT_EQ(src->tokenizer_json, R"({"model": {"type": "BPE"}})");
  EXPECT_EQ(src->tokenizer_config_json, R"({"add_bos_token": true})");
  EXPECT_EQ(src->eos_token_ids, (std::vector<int32_t>{2, 7}));
  auto gguf_src = OpenModelSource(testing::SourcePath("models/stories260K.gguf"));
  ASSERT_TRUE(gguf_src.ok()) << gguf_src.status();
  EXPECT_EQ(gguf_src->format, "gguf");
  std::filesystem::remove(folder + "/tokenizer.json");
  auto no_tok = OpenModelSource(folder);
  ASSERT_FALSE(no_tok.ok());
  EXPECT_THAT(std::string(no_tok.status().message()), HasSubstr("tokenizer.json"));
}

TEST(HfWriter, RefusesWhatHasNoHfForm) {
  RandomModelSpec spec = testing::SmallLlama();
  spec.arch = "gpt2";
  spec.kv_heads = 0;
  auto gpt2 = testing::RandomGguf(spec);
  TempDir dir;
  auto s = WriteHfFolder(*gpt2, dir.path(), {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  auto llama = testing::RandomGguf(testing::SmallLlama());
  ASSERT_TRUE(WriteHfFolder(*llama, dir.path(), {}).ok());
  EXPECT_EQ(WriteHfFolder(*llama, dir.path(), {}).code(), absl::StatusCode::kAlreadyExists);
}

// A rope_freqs.weight of Llama 3.1's factors (written by the GGUF model
// writer) becomes config.json's rope_scaling, whose factors the folder
// loader computes again.
TEST(HfWriter, WritesLlama3RopeScaling) {
  RandomModelSpec spec = testing::SmallLlama(64, 4, 2);
  spec.rope_base = 500000.0f;
  spec.rope_scaling = "llama3";
  auto gguf = testing::RandomGguf(spec);
  TempDir dir;
  ASSERT_TRUE(WriteHfFolder(*gguf, dir.path(), {}).ok());
  const json config = json::parse(testing::ReadFile(dir / "config.json"));
  ASSERT_TRUE(config.contains("rope_scaling")) << config.dump();
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(config["rope_scaling"]["factor"], 8.0);
  EXPECT_EQ(config["rope_theta"], 500000.0);
  auto view = OpenHfWeights(dir.path());
  ASSERT_TRUE(view.ok()) << view.status();
  const GgufTensorInfo* want = gguf->FindTensor("rope_freqs.weight");
  const GgufTensorInfo* got = (*view)->FindTensor("rope_freqs.weight");
  ASSERT_NE(want, nullptr);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(got->dims, want->dims);
  const auto* w = reinterpret_cast<const float*>(want->data);
  const auto* g = reinterpret_cast<const float*>(got->data);
  bool scaled = false;
  for (uint64_t i = 0; i < want->dims[0]; ++i) {
    EXPECT_NEAR(g[i], w[i], 1e-5 * w[i]) << i;
    scaled = scaled || w[i] > 1.0f;
  }
  EXPECT_TRUE(scaled);  // the factors are not all 1
}

// A folder's chat template, in transformers' order: chat_template.jinja,
// then chat_template.json (multimodal processors, such as Gemma 3 4B's),
// then tokenizer_config.json.
TEST(ChatTemplateSource, FolderFilesInTransformersOrder) {
  testing::TempDir dir;
  ModelSource source;
  source.format = "hf";
  source.tokenizer_config_json = R"({"chat_template": "from-config"})";
  auto find = [&] { return FindChatTemplate(source, dir.path(), ""); };
  EXPECT_EQ(find().value_or("?"), "from-config");
  testing::WriteText(dir / "chat_template.json", R"({"chat_template": "from-json"})");
  EXPECT_EQ(find().value_or("?"), "from-json");
  testing::WriteText(dir / "chat_template.jinja", "from-jinja");
  EXPECT_EQ(find().value_or("?"), "from-jinja");
  std::filesystem::remove(dir / "chat_template.jinja");
  testing::WriteText(dir / "chat_template.json", R"({"chat_template": 3})");
  EXPECT_EQ(find().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
