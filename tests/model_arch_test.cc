// Architectures beyond the reference logits check: greedy generation through
// the paged KV cache (prefill, then decode steps, several sequences at once)
// against the dense reference, and files whose metadata or tensors describe
// something the engine does not compute, refused at load with a clear error.
#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/model/model_writer.h"
#include "gtest/gtest.h"
#include "testing/engine_harness.h"
#include "testing/naive_transformer.h"
#include "testing/temp_model.h"

namespace tessera {
namespace {

using testing::CollectingSink;
using testing::GreedyRequest;

RandomModelSpec Spec(const std::string& arch) {
  RandomModelSpec spec;
  spec.arch = arch;
  spec.dim = 64;
  spec.layers = 2;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ffn = 128;
  spec.context = 128;
  spec.vocab_size = 300;
  spec.seed = 7;
  spec.output_std = 0.5f;
  spec.weight_std = 0.125f;  // layers matter: tokens depend on the whole context
  return spec;
}

// Greedy continuation by the dense reference: the whole sequence again for
// every new token.
std::vector<int32_t> ReferenceGreedy(const std::string& path, std::vector<int32_t> ids, int n) {
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok());
  testing::NaiveTransformer reference(**file);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const std::vector<double> logits = reference.LastLogits(ids);
    int32_t best = 0;
    for (size_t j = 0; j < logits.size(); ++j) {
      if (logits[j] > logits[best]) best = static_cast<int32_t>(j);
    }
    out.push_back(best);
    ids.push_back(best);
  }
  return out;
}

struct GreedyCase {
  const char* label;
  RandomModelSpec spec;
};

class ArchGreedy : public ::testing::TestWithParam<GreedyCase> {};

// Two sequences at once, in blocks of 4 tokens: the sliding window (3 keys)
// spans blocks, and decode steps read it from the paged cache.
TEST_P(ArchGreedy, PagedDecodeMatchesDenseReference) {
  const GreedyCase& c = GetParam();
  const std::string path = testing::WriteTempModel(c.spec, std::string("greedy-") + c.label);
  EngineOptions options;
  options.model_path = path;
  options.device = "cpu";
  options.num_threads = 2;
  options.block_size = 4;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<std::vector<int32_t>> prompts = {{17, 3, 250, 9, 100}, {5, 6, 7}};
  constexpr int kTokens = 10;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    GenerationRequest r = GreedyRequest(i + 1, prompts[i], kTokens);
    r.stopping.ignore_eos = true;
    ASSERT_TRUE((*engine)->Submit(std::move(r), sinks.back()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    sinks[i]->Wait();
    EXPECT_EQ(sinks[i]->token_ids, ReferenceGreedy(path, prompts[i], kTokens))
        << c.label << " prompt " << i;
  }
}

RandomModelSpec Gemma3Spec() {
  RandomModelSpec s = Spec("gemma3");
  s.layers = 7;  // layers 0-4 and 6 slide, layer 5 is global
  s.head_dim = 32;
  s.sliding_window = 3;
  s.tied = true;
  s.rope_base = 1000000.0f;
  // Less peaked than the others, so that the window decides some tokens.
  s.output_std = 0.1f;
  return s;
}

RandomModelSpec Llama3Spec() {
  RandomModelSpec s = Spec("llama");
  s.rope_scaling = "llama3";
  s.rope_base = 500000.0f;
  s.head_dim = 32;
  return s;
}

INSTANTIATE_TEST_SUITE_P(Architectures, ArchGreedy,
                         ::testing::Values(GreedyCase{"llama3", Llama3Spec()},
                                           GreedyCase{"qwen2", Spec("qwen2")},
                                           GreedyCase{"qwen3", Spec("qwen3")},
                                           GreedyCase{"phi3", Spec("phi3")},
                                           GreedyCase{"gemma3", Gemma3Spec()}),
                         [](const auto& info) { return std::string(info.param.label); });

// Sampled tokens (seeded, so any difference in the logits shows) of a
// sliding-window model are the same for a sequence alone, among others,
// and with its prompt prefilled in chunks.
TEST(ArchBatchInvariance, Gemma3SlidingWindowAloneBatchedAndChunked) {
  const std::string path = testing::WriteTempModel(Gemma3Spec(), "gemma3-batch");
  auto make = [&](int32_t max_tokens) {
    EngineOptions options;
    options.model_path = path;
    options.device = "cpu";
    options.num_threads = 2;
    options.block_size = 4;
    options.max_batched_tokens = max_tokens;
    auto engine = Engine::Create(options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  };
  auto request = [](int i) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 3 + 5 * i; ++t) prompt.push_back((37 * i + 11 * t) % 290 + 6);
    GenerationRequest r = GreedyRequest(i + 1, prompt, 20);
    r.stopping.ignore_eos = true;
    r.sampling.temperature = 0.9f;
    r.sampling.seed = 500 + i;
    r.sampling.has_seed = true;
    return r;
  };
  auto run = [&](Engine& engine, int n, bool together) {
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < n; ++i) {
      sinks.push_back(std::make_shared<CollectingSink>());
      EXPECT_TRUE(engine.Submit(request(i), sinks.back()).ok());
      if (!together) sinks.back()->Wait();
    }
    for (auto& s : sinks) s->Wait(), out.push_back(s->token_ids);
    return out;
  };
  auto engine = make(2048);
  ASSERT_NE(engine, nullptr);
  const auto alone = run(*engine, 6, false);
  EXPECT_EQ(run(*engine, 6, true), alone);
  auto chunked = make(8);  // prompts of up to 28 tokens prefill 8 at a time
  ASSERT_NE(chunked, nullptr);
  EXPECT_EQ(run(*chunked, 6, true), alone);
}

// --- refused files ---

// Copies a written model, renaming, dropping or adding keys and tensors.
struct Edit {
  std::function<std::string(const std::string&)> rename_key = [](const std::string& k) {
    return k;
  };
  std::function<bool(const std::string&)> drop_tensor = [](const std::string&) { return false; };
  std::function<void(GgufWriter&)> add = [](GgufWriter&) {};
};

std::string EditedModel(const RandomModelSpec& spec, const Edit& edit, const std::string& tag) {
  const std::string base = testing::WriteTempModel(spec, "edit-base-" + tag);
  auto file = GgufFile::Open(base);
  EXPECT_TRUE(file.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*file)->metadata()) {
    const std::string k = edit.rename_key(key);
    if (!k.empty()) w.SetValue(k, value);
  }
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    if (edit.drop_tensor(t.name)) continue;
    const size_t bytes = t.num_elements * GgmlTypeSize(t.type);
    w.AddTensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + bytes));
  }
  edit.add(w);
  const std::string path = base + "." + tag + ".gguf";
  EXPECT_TRUE(w.WriteFile(path).ok());
  testing::ProcessTempFiles().Add(path);
  return path;
}

absl::Status LoadStatus(const std::string& path) {
  EngineOptions options;
  options.model_path = path;
  options.device = "cpu";
  options.num_threads = 1;
  auto engine = Engine::Create(options);
  return engine.ok() ? absl::OkStatus() : engine.status();
}

void ExpectRefused(const std::string& path, const std::string& words) {
  const absl::Status s = LoadStatus(path);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find(words), std::string::npos) << s;
}

// Moves every "<from>.*" key to "<to>.*" and relabels the architecture.
Edit Relabel(const std::string& from, const std::string& to) {
  Edit e;
  e.rename_key = [from, to](const std::string& k) {
    return k.rfind(from + ".", 0) == 0 ? to + k.substr(from.size()) : k;
  };
  e.add = [to](GgufWriter& w) { w.SetString("general.architecture", to); };
  return e;
}

TEST(ArchRefused, UnknownArchitecture) {
  ExpectRefused(EditedModel(Spec("llama"), Relabel("llama", "mamba"), "mamba"),
                "unsupported architecture 'mamba'");
}

TEST(ArchRefused, Qwen2FileLabelledQwen3LacksQkNorms) {
  ExpectRefused(EditedModel(Spec("qwen2"), Relabel("qwen2", "qwen3"), "q3"),
                "missing tensor blk.0.attn_q_norm.weight");
}

TEST(ArchRefused, UnsupportedRopeScaling) {
  Edit e;
  e.add = [](GgufWriter& w) {
    w.SetString("llama.rope.scaling.type", "yarn");
    w.SetFloat32("llama.rope.scaling.factor", 4.0f);
  };
  ExpectRefused(EditedModel(Spec("llama"), e, "yarn"), "unsupported rope.scaling.type 'yarn'");
}

TEST(ArchRefused, UnknownArchitectureKey) {
  Edit e;
  e.add = [](GgufWriter& w) { w.SetUint32("qwen2.attention.sliding_window", 16); };
  ExpectRefused(EditedModel(Spec("qwen2"), e, "key"),
                "unsupported model metadata key qwen2.attention.sliding_window");
}

TEST(ArchRefused, MissingTensor) {
  Edit e;
  e.drop_tensor = [](const std::string& n) { return n == "blk.1.attn_k.bias"; };
  ExpectRefused(EditedModel(Spec("qwen2"), e, "missing"), "missing tensor blk.1.attn_k.bias");
}

TEST(ArchRefused, ExtraTensor) {
  Edit e;
  e.add = [](GgufWriter& w) {
    w.AddTensor("blk.0.attn_q.bias", {64}, GgmlType::kF32, std::vector<uint8_t>(256, 0));
  };
  ExpectRefused(EditedModel(Spec("llama"), e, "extra"),
                "tensor blk.0.attn_q.bias is not used by architecture llama");
}

TEST(ArchRefused, HeadDimInconsistentWithTensors) {
  Edit e;
  e.add = [](GgufWriter& w) { w.SetUint32("llama.attention.key_length", 32); };
  ExpectRefused(EditedModel(Spec("llama"), e, "headdim"), "tensor blk.0.attn_q.weight has dims");
}

// Long-rope Phi-3 runs (llamacpp_parity_test) with both factor sets; one
// alone, or an attention factor without them, would run something else.
TEST(ArchRefused, Phi3LongRopeWithOneFactorSet) {
  Edit e;
  e.add = [](GgufWriter& w) {
    w.AddTensor("rope_factors_long.weight", {8}, GgmlType::kF32, std::vector<uint8_t>(32, 0));
  };
  ExpectRefused(EditedModel(Spec("phi3"), e, "longrope"),
                "phi3 long-rope needs both rope_factors_long.weight and rope_factors_short.weight");
}

TEST(ArchRefused, Phi3AttentionFactorWithoutFactors) {
  Edit e;
  e.add = [](GgufWriter& w) { w.SetFloat32("phi3.rope.scaling.attn_factor", 1.19f); };
  ExpectRefused(EditedModel(Spec("phi3"), e, "attnfactor"),
                "needs rope_factors_long/short.weight");
}

TEST(ArchRefused, Gemma3WithoutSlidingWindow) {
  Edit e;
  e.rename_key = [](const std::string& k) {
    return k == "gemma3.attention.sliding_window" ? std::string() : k;
  };
  ExpectRefused(EditedModel(Gemma3Spec(), e, "nowindow"), "gemma3.attention.sliding_window");
}

TEST(ArchRefused, VocabSizeDisagreesWithTokens) {
  Edit e;
  e.add = [](GgufWriter& w) { w.SetUint32("qwen3.vocab_size", 301); };
  ExpectRefused(EditedModel(Spec("qwen3"), e, "vocab"), "qwen3.vocab_size 301 does not match");
}

}  // namespace
}  // namespace tessera
