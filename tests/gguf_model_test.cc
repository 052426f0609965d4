// The random-model writer behind tessera-make-model: its files must load in
// the GGUF reader with llama.cpp's tensor names, shapes and metadata.
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "engine/model/float16.h"
#include "engine/model/gguf.h"
#include "engine/model/model_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/gzip_file.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

const std::string kStories = std::string(TESSERA_SOURCE_DIR) + "/models/stories260K.gguf";

RandomModelSpec SmallLlama() {
  RandomModelSpec s;
  s.arch = "llama";
  s.dim = 64;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.ffn = 96;
  s.context = 128;
  s.vocab_size = 300;
  return s;
}

RandomModelSpec SmallGpt2() {
  RandomModelSpec s;
  s.arch = "gpt2";
  s.dim = 32;
  s.layers = 3;
  s.heads = 2;
  s.ffn = 128;
  s.context = 64;
  s.vocab_size = 1000;
  return s;
}

struct Built {
  std::unique_ptr<GgufFile> file;
  uint64_t params = 0;
  std::vector<uint8_t> bytes;
};

Built Build(const RandomModelSpec& spec) {
  Built b;
  GgufWriter w;
  absl::StatusOr<uint64_t> params = BuildRandomModel(spec, &w);
  EXPECT_TRUE(params.ok()) << params.status();
  if (!params.ok()) return b;
  b.params = *params;
  EXPECT_TRUE(w.Validate().ok()) << w.Validate();
  b.bytes = w.Serialize();
  auto file = GgufFile::FromBytes(b.bytes);
  EXPECT_TRUE(file.ok()) << file.status();
  if (file.ok()) b.file = std::move(*file);
  return b;
}

void ExpectTensor(const GgufFile& f, const std::string& name, std::vector<uint64_t> dims,
                  GgmlType type) {
  const GgufTensorInfo* t = f.FindTensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->dims, dims) << name;
  EXPECT_EQ(t->type, type) << name;
}

// Mean and standard deviation of a tensor's values.
std::pair<double, double> Stats(const GgufTensorInfo& t) {
  double sum = 0, sum_sq = 0;
  for (uint64_t i = 0; i < t.num_elements; ++i) {
    uint16_t h = 0;
    float v = 0;
    if (t.type == GgmlType::kF32) {
      std::memcpy(&v, t.data + 4 * i, 4);
    } else {
      std::memcpy(&h, t.data + 2 * i, 2);
      v = t.type == GgmlType::kF16 ? HalfToFloat(h) : Bf16ToFloat(h);
    }
    sum += v;
    sum_sq += double{v} * v;
  }
  const double n = static_cast<double>(t.num_elements);
  return {sum / n, std::sqrt(sum_sq / n - (sum / n) * (sum / n))};
}

TEST(RandomModelTest, LlamaTensorsAndMetadata) {
  RandomModelSpec spec = SmallLlama();
  spec.dtype = GgmlType::kF16;
  spec.rope_base = 500000.0f;
  Built b = Build(spec);
  ASSERT_NE(b.file, nullptr);
  const GgufFile& f = *b.file;
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetString("general.name"), "tessera-random-llama");
  EXPECT_EQ(*f.GetUint("general.file_type"), 1u);
  EXPECT_EQ(*f.GetUint("llama.context_length"), 128u);
  EXPECT_EQ(*f.GetUint("llama.embedding_length"), 64u);
  EXPECT_EQ(*f.GetUint("llama.block_count"), 2u);
  EXPECT_EQ(*f.GetUint("llama.feed_forward_length"), 96u);
  EXPECT_EQ(*f.GetUint("llama.attention.head_count"), 4u);
  EXPECT_EQ(*f.GetUint("llama.attention.head_count_kv"), 2u);
  EXPECT_FLOAT_EQ(*f.GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(*f.GetUint("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(*f.GetFloat("llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(*f.GetUint("llama.vocab_size"), 300u);
  const GgmlType h = GgmlType::kF16, f32 = GgmlType::kF32;
  ExpectTensor(f, "token_embd.weight", {64, 300}, h);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    ExpectTensor(f, p + "attn_norm.weight", {64}, f32);
    ExpectTensor(f, p + "attn_q.weight", {64, 64}, h);
    ExpectTensor(f, p + "attn_k.weight", {64, 32}, h);
    ExpectTensor(f, p + "attn_v.weight", {64, 32}, h);
    ExpectTensor(f, p + "attn_output.weight", {64, 64}, h);
    ExpectTensor(f, p + "ffn_norm.weight", {64}, f32);
    ExpectTensor(f, p + "ffn_gate.weight", {64, 96}, h);
    ExpectTensor(f, p + "ffn_up.weight", {64, 96}, h);
    ExpectTensor(f, p + "ffn_down.weight", {96, 64}, h);
  }
  ExpectTensor(f, "output_norm.weight", {64}, f32);
  ExpectTensor(f, "output.weight", {64, 300}, h);
  EXPECT_EQ(f.tensors().size(), 1u + 2 * 9 + 2);
  uint64_t params = 0;
  for (const auto& t : f.tensors()) params += t.num_elements;
  EXPECT_EQ(params, b.params);
}

TEST(RandomModelTest, LlamaSyntheticVocab) {
  Built b = Build(SmallLlama());
  ASSERT_NE(b.file, nullptr);
  const GgufFile& f = *b.file;
  EXPECT_EQ(*f.GetString("tokenizer.ggml.model"), "llama");
  const auto tokens = *f.GetStringArray("tokenizer.ggml.tokens");
  const auto types = *f.GetIntArray("tokenizer.ggml.token_type");
  const auto scores = *f.GetFloatArray("tokenizer.ggml.scores");
  ASSERT_EQ(tokens.size(), 300u);
  ASSERT_EQ(types.size(), 300u);
  ASSERT_EQ(scores.size(), 300u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[3 + 0xAB], "<0xAB>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  EXPECT_EQ(tokens[259], "\xe2\x96\x81");
  EXPECT_EQ(tokens[260],
            "\xe2\x96\x81"
            "a");
  EXPECT_EQ(tokens[261], "a");
  EXPECT_EQ((std::vector<int64_t>{types[0], types[1], types[2], types[3], types[258], types[259]}),
            (std::vector<int64_t>{2, 3, 3, 6, 6, 1}));
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size());
  for (size_t i = 260; i < scores.size(); ++i) ASSERT_LT(scores[i], scores[i - 1]);
  EXPECT_EQ(*f.GetUint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f.GetUint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(*f.GetUint("tokenizer.ggml.unknown_token_id"), 0u);
  EXPECT_EQ(*f.GetBool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(*f.GetBool("tokenizer.ggml.add_eos_token"), false);
}

// The synthetic vocabs start like the real llama SentencePiece and GPT-2
// vocabs (specials, byte tokens, GPT-2's byte alphabet order).
TEST(RandomModelTest, SyntheticVocabsMatchRealVocabLayouts) {
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/tests/data/vocab/";
  auto spm = GgufFile::Open(dir + "ggml-vocab-llama-spm.gguf");
  auto gpt2 = GgufFile::Open(testing::UnpackedPath(dir + "ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(spm.ok()) << spm.status();
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  const auto real_spm = *(*spm)->GetStringArray("tokenizer.ggml.tokens");
  const auto real_spm_types = *(*spm)->GetIntArray("tokenizer.ggml.token_type");
  const auto real_gpt2 = *(*gpt2)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(real_spm.size(), 32000u);
  ASSERT_EQ(real_gpt2.size(), 50257u);
  Built llama = Build(SmallLlama());
  ASSERT_NE(llama.file, nullptr);
  const auto ours = *llama.file->GetStringArray("tokenizer.ggml.tokens");
  const auto our_types = *llama.file->GetIntArray("tokenizer.ggml.token_type");
  for (size_t i = 0; i < 259; ++i) {
    ASSERT_EQ(ours[i], real_spm[i]) << i;
    ASSERT_EQ(our_types[i], real_spm_types[i]) << i;
  }
  Built g = Build(SmallGpt2());
  ASSERT_NE(g.file, nullptr);
  const auto ours_gpt2 = *g.file->GetStringArray("tokenizer.ggml.tokens");
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(ours_gpt2[i], real_gpt2[i]) << i;
  EXPECT_EQ(real_gpt2.back(), "<|endoftext|>");
}

TEST(RandomModelTest, Gpt2TiedBf16) {
  RandomModelSpec spec = SmallGpt2();
  spec.tied = true;
  spec.dtype = GgmlType::kBF16;
  spec.name = "tiny";
  Built b = Build(spec);
  ASSERT_NE(b.file, nullptr);
  const GgufFile& f = *b.file;
  EXPECT_EQ(*f.GetString("general.name"), "tiny");
  EXPECT_EQ(*f.GetUint("general.file_type"), 32u);
  EXPECT_EQ(*f.GetUint("gpt2.context_length"), 64u);
  EXPECT_EQ(*f.GetUint("gpt2.embedding_length"), 32u);
  EXPECT_EQ(*f.GetUint("gpt2.block_count"), 3u);
  EXPECT_EQ(*f.GetUint("gpt2.feed_forward_length"), 128u);
  EXPECT_EQ(*f.GetUint("gpt2.attention.head_count"), 2u);
  EXPECT_FLOAT_EQ(*f.GetFloat("gpt2.attention.layer_norm_epsilon"), 1e-5f);
  const GgmlType bf = GgmlType::kBF16, f32 = GgmlType::kF32;
  ExpectTensor(f, "token_embd.weight", {32, 1000}, bf);
  ExpectTensor(f, "position_embd.weight", {32, 64}, bf);
  const std::string p = "blk.2.";
  ExpectTensor(f, p + "attn_norm.weight", {32}, f32);
  ExpectTensor(f, p + "attn_norm.bias", {32}, f32);
  ExpectTensor(f, p + "attn_qkv.weight", {32, 96}, bf);
  ExpectTensor(f, p + "attn_qkv.bias", {96}, f32);
  ExpectTensor(f, p + "attn_output.weight", {32, 32}, bf);
  ExpectTensor(f, p + "attn_output.bias", {32}, f32);
  ExpectTensor(f, p + "ffn_norm.weight", {32}, f32);
  ExpectTensor(f, p + "ffn_norm.bias", {32}, f32);
  ExpectTensor(f, p + "ffn_up.weight", {32, 128}, bf);
  ExpectTensor(f, p + "ffn_up.bias", {128}, f32);
  ExpectTensor(f, p + "ffn_down.weight", {128, 32}, bf);
  ExpectTensor(f, p + "ffn_down.bias", {32}, f32);
  ExpectTensor(f, "output_norm.weight", {32}, f32);
  ExpectTensor(f, "output_norm.bias", {32}, f32);
  EXPECT_EQ(f.FindTensor("output.weight"), nullptr);
  EXPECT_EQ(f.tensors().size(), 2u + 3 * 12 + 2);
}

TEST(RandomModelTest, Gpt2VocabMergesComposeEarlierTokens) {
  Built b = Build(SmallGpt2());
  ASSERT_NE(b.file, nullptr);
  const GgufFile& f = *b.file;
  EXPECT_EQ(*f.GetString("tokenizer.ggml.model"), "gpt2");
  const auto tokens = *f.GetStringArray("tokenizer.ggml.tokens");
  const auto merges = *f.GetStringArray("tokenizer.ggml.merges");
  const auto types = *f.GetIntArray("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), 1000u);
  ASSERT_EQ(merges.size(), 1000u - 257u);
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(tokens[999], "<|endoftext|>");
  EXPECT_EQ(types[999], 3);
  EXPECT_EQ(*f.GetUint("tokenizer.ggml.bos_token_id"), 999u);
  EXPECT_EQ(*f.GetUint("tokenizer.ggml.eos_token_id"), 999u);
  const auto& b2u = Gpt2ByteToUnicode();
  EXPECT_EQ(b2u[' '], "\xc4\xa0");  // U+0120 'Ġ'
  EXPECT_EQ(b2u['A'], "A");
  EXPECT_EQ(std::set<std::string>(b2u.begin(), b2u.end()).size(), 256u);
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.begin() + 256),
            std::set<std::string>(b2u.begin(), b2u.end()));
  std::map<std::string, size_t> id;
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_TRUE(id.emplace(tokens[i], i).second);
  for (size_t k = 0; k < merges.size(); ++k) {
    const size_t space = merges[k].find(' ');
    ASSERT_NE(space, std::string::npos);
    const std::string left = merges[k].substr(0, space), right = merges[k].substr(space + 1);
    ASSERT_EQ(tokens[256 + k], left + right) << merges[k];
    ASSERT_LT(id.at(left), 256 + k) << merges[k];
    ASSERT_LT(id.at(right), 256 + k) << merges[k];
  }
}

TEST(RandomModelTest, WeightsAreDeterministicAndWellScaled) {
  Built a = Build(SmallLlama());
  Built again = Build(SmallLlama());
  RandomModelSpec other = SmallLlama();
  other.seed = 1;
  Built c = Build(other);
  ASSERT_NE(a.file, nullptr);
  ASSERT_NE(c.file, nullptr);
  EXPECT_EQ(a.bytes, again.bytes);
  EXPECT_NE(a.bytes, c.bytes);
  auto [q_mean, q_std] = Stats(*a.file->FindTensor("blk.0.attn_q.weight"));
  EXPECT_NEAR(q_mean, 0.0, 0.002);
  EXPECT_NEAR(q_std, 0.02, 0.002);
  auto [o_mean, o_std] = Stats(*a.file->FindTensor("blk.1.ffn_down.weight"));
  EXPECT_NEAR(o_std, 0.02 / 2.0, 0.002);  // 0.02 / sqrt(2 * layers)
  auto [n_mean, n_std] = Stats(*a.file->FindTensor("output_norm.weight"));
  EXPECT_NEAR(n_mean, 1.0, 0.02);
  EXPECT_LT(n_std, 0.05);
  // Two tensors of the same shape get different values.
  const GgufTensorInfo* q = a.file->FindTensor("blk.0.attn_q.weight");
  const GgufTensorInfo* q1 = a.file->FindTensor("blk.1.attn_q.weight");
  EXPECT_NE(std::memcmp(q->data, q1->data, q->num_bytes), 0);
}

TEST(RandomModelTest, CopiesVocabFromAnotherFile) {
  auto stories = GgufFile::Open(kStories);
  ASSERT_TRUE(stories.ok()) << stories.status();
  RandomModelSpec spec = SmallLlama();
  spec.vocab_size = 0;
  spec.vocab_from = stories->get();
  Built b = Build(spec);
  ASSERT_NE(b.file, nullptr);
  EXPECT_EQ(*b.file->GetStringArray("tokenizer.ggml.tokens"),
            *(*stories)->GetStringArray("tokenizer.ggml.tokens"));
  EXPECT_EQ(*b.file->GetFloatArray("tokenizer.ggml.scores"),
            *(*stories)->GetFloatArray("tokenizer.ggml.scores"));
  EXPECT_EQ(*b.file->GetUint("llama.vocab_size"), 512u);
  ExpectTensor(*b.file, "token_embd.weight", {64, 512}, GgmlType::kF32);
  for (const auto& [key, value] : (*stories)->metadata()) {
    if (key.rfind("tokenizer.ggml.", 0) == 0) {
      EXPECT_NE(b.file->FindValue(key), nullptr) << key;
    }
  }
  spec.vocab_size = 300;
  EXPECT_THAT(std::string(ValidateRandomModelSpec(spec).message()),
              HasSubstr("does not match the 512 tokens"));
  spec.vocab_size = 512;
  EXPECT_TRUE(ValidateRandomModelSpec(spec).ok());
  // A real 50257-token GPT-2 vocab with merges.
  auto gpt2 = GgufFile::Open(testing::UnpackedPath(std::string(TESSERA_SOURCE_DIR) +
                                                   "/tests/data/vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  RandomModelSpec g = SmallGpt2();
  g.vocab_size = 0;
  g.vocab_from = gpt2->get();
  Built bg = Build(g);
  ASSERT_NE(bg.file, nullptr);
  EXPECT_EQ(bg.file->GetStringArray("tokenizer.ggml.merges")->size(),
            (*gpt2)->GetStringArray("tokenizer.ggml.merges")->size());
  ExpectTensor(*bg.file, "token_embd.weight", {32, 50257}, GgmlType::kF32);
}

TEST(RandomModelTest, RejectsBadSpecs) {
  auto error = [](auto mutate) {
    RandomModelSpec s = SmallLlama();
    mutate(s);
    GgufWriter w;
    absl::StatusOr<uint64_t> built = BuildRandomModel(s, &w);
    EXPECT_FALSE(built.ok());
    return std::string(built.status().message());
  };
  EXPECT_THAT(error([](auto& s) { s.arch = "mamba"; }), HasSubstr("arch"));
  EXPECT_THAT(error([](auto& s) { s.dim = 0; }), HasSubstr("dim"));
  EXPECT_THAT(error([](auto& s) { s.layers = 0; }), HasSubstr("layers"));
  EXPECT_THAT(error([](auto& s) { s.ffn = 0; }), HasSubstr("ffn"));
  EXPECT_THAT(error([](auto& s) { s.context = 0; }), HasSubstr("context"));
  EXPECT_THAT(error([](auto& s) { s.heads = 0; }), HasSubstr("heads"));
  EXPECT_THAT(error([](auto& s) { s.heads = 5; }), HasSubstr("not divisible by heads"));
  EXPECT_THAT(error([](auto& s) { s.kv_heads = 3; }), HasSubstr("must divide heads"));
  EXPECT_THAT(error([](auto& s) { s.kv_heads = 8; }), HasSubstr("must divide heads"));
  EXPECT_THAT(error([](auto& s) { s.dim = 36; }), HasSubstr("even"));  // head dim 9
  EXPECT_THAT(error([](auto& s) { s.vocab_size = 258; }), HasSubstr("259"));
  EXPECT_THAT(error([](auto& s) { s.rope_base = -1.0f; }), HasSubstr("rope"));
  EXPECT_THAT(error([](auto& s) { s.dtype = static_cast<GgmlType>(2); }), HasSubstr("dtype"));
  EXPECT_THAT(error([](auto& s) { s.dim = 1u << 30; }), HasSubstr("dim must be in"));
  auto gpt2_error = [](auto mutate) {
    RandomModelSpec s = SmallGpt2();
    mutate(s);
    return std::string(ValidateRandomModelSpec(s).message());
  };
  EXPECT_THAT(gpt2_error([](auto& s) { s.kv_heads = 1; }), HasSubstr("not for gpt2"));
  EXPECT_THAT(gpt2_error([](auto& s) { s.rope_base = 10000.0f; }), HasSubstr("not for gpt2"));
  EXPECT_THAT(gpt2_error([](auto& s) { s.head_dim = 8; }), HasSubstr("not for gpt2"));
  EXPECT_THAT(error([](auto& s) { s.rope_scaling = "yarn"; }), HasSubstr("llama3"));
  EXPECT_THAT(error([](auto& s) { s.sliding_window = 4; }), HasSubstr("gemma3 only"));
  EXPECT_THAT(gpt2_error([](auto& s) { s.vocab_size = 256; }), HasSubstr("257"));
  EXPECT_TRUE(gpt2_error([](auto& s) { s.vocab_size = 257; }).empty());
}

TEST(RandomModelTest, WrittenFileOpensAndMatchesSerialize) {
  RandomModelSpec spec = SmallGpt2();
  spec.dtype = GgmlType::kF16;
  spec.vocab_size = 257;  // no merges at all
  GgufWriter w;
  ASSERT_TRUE(BuildRandomModel(spec, &w).ok());
  const std::string path = ::testing::TempDir() + "/gguf_model_test.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->GetStringArray("tokenizer.ggml.merges")->empty());
  auto image = GgufFile::FromBytes(w.Serialize());
  ASSERT_TRUE(image.ok());
  ASSERT_EQ((*file)->tensors().size(), (*image)->tensors().size());
  for (size_t i = 0; i < (*file)->tensors().size(); ++i) {
    const GgufTensorInfo& x = (*file)->tensors()[i];
    const GgufTensorInfo& y = (*image)->tensors()[i];
    ASSERT_EQ(x.num_bytes, y.num_bytes);
    ASSERT_EQ(std::memcmp(x.data, y.data, x.num_bytes), 0) << x.name;
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tessera
