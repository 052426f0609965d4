// tessera-eval's statistics against hand-computed values and a naive double
// reference, its chunking against llama-perplexity's, and its perplexity
// against llama-perplexity's on the same models and text (committed numbers
// in tests/data/eval, and a live run when the llama.cpp build is present).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/engine_harness.h"
#include "testing/naive_transformer.h"
#include "testing/temp_model.h"
#include "tools/eval/evaluate.h"

namespace tessera::eval {
namespace {

constexpr const char* kLlamaPerplexity = "/work/shared/tools/llama.cpp/bin/llama-perplexity";

std::string TextPath() { return testing::SourcePath("tests/data/eval/lighthouse.txt"); }
std::string SpmVocab() { return testing::SourcePath("tests/data/vocab/ggml-vocab-llama-spm.gguf"); }

// KL(p || q) of explicit distributions, in long double.
long double NaiveKl(const std::vector<long double>& p, const std::vector<long double>& q) {
  long double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) kl += p[i] * std::log(p[i] / q[i]);
  return kl;
}

std::vector<long double> NaiveSoftmax(const std::vector<double>& logits) {
  long double max = logits[0], sum = 0;
  for (double x : logits) max = std::max<long double>(max, x);
  std::vector<long double> p;
  for (double x : logits) p.push_back(std::exp(x - max));
  for (long double v : p) sum += v;
  for (long double& v : p) v /= sum;
  return p;
}

TEST(EvalStats, KlOfHandComputedRows) {
  // p = (1, 2, 3) / 6, q uniform: KL = 1/6 ln(1/2) + 1/2 ln(3/2).
  const std::vector<float> base = {0.0f, std::log(2.0f), std::log(3.0f)};
  const std::vector<float> model = {5.0f, 5.0f, 5.0f};
  const TokenComparison t = CompareRows(base, model, 1);
  EXPECT_NEAR(t.kld, std::log(0.5) / 6 + std::log(1.5) / 2, 1e-7);
  EXPECT_NEAR(t.nll_base, -std::log(2.0 / 6), 1e-7);
  EXPECT_NEAR(t.nll_model, std::log(3.0), 1e-7);
  EXPECT_NEAR(t.p_diff, 1.0 / 3 - 2.0 / 6, 1e-7);
  EXPECT_FALSE(t.same_top);  // base: 2; model: the first of equal logits, 0
  EXPECT_NEAR(NegLogLikelihood(base, 2), -std::log(0.5), 1e-7);
  // Same rows: 0 divergence, the same top token.
  const TokenComparison self = CompareRows(base, base, 0);
  EXPECT_EQ(self.kld, 0.0);
  EXPECT_TRUE(self.same_top);
}

TEST(EvalStats, KlOfLargeLogitsIsStable) {
  // Shifting every logit by a constant changes nothing; exp(1000) would
  // overflow without the max subtraction.
  const std::vector<float> base = {1000.0f, 999.0f, 990.0f, 1001.0f};
  const std::vector<float> model = {1000.5f, 998.0f, 995.0f, 1001.0f};
  std::vector<double> b0, m0;
  for (float x : base) b0.push_back(double(x) - 1000.0);
  for (float x : model) m0.push_back(double(x) - 1000.0);
  const long double want = NaiveKl(NaiveSoftmax(b0), NaiveSoftmax(m0));
  EXPECT_NEAR(CompareRows(base, model, 0).kld, double(want), 1e-9);
  EXPECT_GT(want, 0.01L);
}

TEST(EvalStats, UncertaintiesFollowLlamaPerplexity) {
  Accumulator a;
  for (double x : {1.0, 2.0, 3.0, 4.0}) a.Add(x);
  EXPECT_DOUBLE_EQ(a.Mean(), 2.5);
  // E[x²] - E[x]² = 7.5 - 6.25 = 1.25; / (n - 1) = 0.41667.
  EXPECT_NEAR(a.StdErr(), std::sqrt(1.25 / 3), 1e-12);
  EXPECT_EQ(a.StdErr(11), 0.0);  // KL statistics need more than 10 values
  const std::vector<float> sorted = {0, 1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0.99), 3.96);
  EXPECT_DOUBLE_EQ(Median({0, 1, 2, 3}), 1.5);
}

TEST(EvalChunks, PlanAsLlamaPerplexity) {
  EXPECT_FALSE(PlanChunks(255, 128, 0).ok());  // fewer than 2 · ctx tokens
  auto plan = PlanChunks(1000, 128, 0);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->num_chunks, 7);
  EXPECT_EQ(plan->first, 64);
  EXPECT_EQ(plan->scored_per_chunk(), 63);
  EXPECT_EQ(PlanChunks(1000, 128, 3)->num_chunks, 3);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 20; ++i) tokens.push_back(100 + i);
  const ChunkPlan p = *PlanChunks(tokens.size(), 8, 0);
  EXPECT_EQ(ChunkTokens(tokens, p, 1, 1),
            (std::vector<int32_t>{1, 109, 110, 111, 112, 113, 114, 115}));
  EXPECT_EQ(ChunkTokens(tokens, p, 1, -1)[0], 108);
}

RandomModelSpec TinySpec(uint64_t seed) {
  RandomModelSpec spec;
  spec.dim = 32;
  spec.layers = 2;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ffn = 64;
  spec.vocab_size = 300;
  spec.context = 64;
  spec.seed = seed;
  spec.output_std = 0.5f;
  return spec;
}

std::unique_ptr<EvalModel> OpenModel(const std::string& path, int32_t ctx, int32_t batch) {
  EvalModelOptions options;
  options.ctx = ctx;
  options.batch = batch;
  options.threads = 2;
  auto m = EvalModel::Open(path, options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<int32_t> Tokens(const EvalModel& m) {
  return TokenizeText(m.tokenizer(), testing::ReadFile(TextPath()));
}

TEST(EvalKld, ModelAgainstItselfIsZero) {
  const std::string path = testing::WriteTempModel(TinySpec(1), "eval-self");
  auto base = OpenModel(path, 32, 12);
  auto model = OpenModel(path, 32, 12);
  ASSERT_TRUE(base && model);
  const std::vector<int32_t> tokens = Tokens(*base);
  const ChunkPlan plan = *PlanChunks(tokens.size(), 32, 3);
  auto stats = KlDivergence(*base, *model, tokens, plan, 12);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->count(), 3u * 15u);
  EXPECT_EQ(stats->kld.Mean(), 0.0);
  EXPECT_EQ(stats->SameTopFraction(), 1.0);
  EXPECT_EQ(stats->nll_base.Mean(), stats->nll_model.Mean());
  EXPECT_GT(stats->nll_base.Mean(), 0.5);
}

// KL divergence and perplexity of two different models against the naive
// double transformer, run on every prefix of each chunk.
TEST(EvalKld, DifferentModelsMatchNaiveReference) {
  const std::string a = testing::WriteTempModel(TinySpec(1), "eval-a");
  const std::string b = testing::WriteTempModel(TinySpec(2), "eval-b");
  constexpr int32_t kCtx = 16;
  auto base = OpenModel(a, kCtx, 5);  // sub-batches of 5 tokens: 5, 5, 5, 1
  auto model = OpenModel(b, kCtx, 5);
  ASSERT_TRUE(base && model);
  const std::vector<int32_t> tokens = Tokens(*base);
  const ChunkPlan plan = *PlanChunks(tokens.size(), kCtx, 2);
  auto stats = KlDivergence(*base, *model, tokens, plan, 5);
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto ppl = Perplexity(*model, tokens, plan, 5);
  ASSERT_TRUE(ppl.ok()) << ppl.status();

  auto fa = GgufFile::Open(a);
  auto fb = GgufFile::Open(b);
  ASSERT_TRUE(fa.ok() && fb.ok());
  testing::NaiveTransformer ra(**fa), rb(**fb);
  long double kl_sum = 0, nll_sum = 0;
  int same = 0, count = 0;
  for (int32_t c = 0; c < plan.num_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * kCtx, tokens.begin() + (c + 1) * kCtx);
    chunk[0] = base->tokenizer().bos_id();
    for (int32_t j = kCtx / 2; j < kCtx - 1; ++j) {
      const std::vector<int32_t> prefix(chunk.begin(), chunk.begin() + j + 1);
      const auto p = NaiveSoftmax(ra.LastLogits(prefix));
      const auto q = NaiveSoftmax(rb.LastLogits(prefix));
      kl_sum += NaiveKl(p, q);
      nll_sum += -std::log(q[chunk[j + 1]]);
      same += std::max_element(p.begin(), p.end()) - p.begin() ==
              std::max_element(q.begin(), q.end()) - q.begin();
      ++count;
    }
  }
  ASSERT_EQ(stats->count(), size_t(count));
  const double want_kl = double(kl_sum / count);
  EXPECT_GT(want_kl, 0.05);  // the models differ
  EXPECT_NEAR(stats->kld.Mean(), want_kl, 1e-3 * want_kl);
  EXPECT_NEAR(stats->nll_model.Mean(), double(nll_sum / count), 1e-4);
  EXPECT_NEAR(ppl->nll.Mean(), double(nll_sum / count), 1e-4);
  EXPECT_EQ(stats->same_top, size_t(same));
  EXPECT_LT(stats->SameTopFraction(), 1.0);
}

TEST(EvalKld, RefusesDifferentVocabularies) {
  RandomModelSpec spm = TinySpec(1);
  auto vocab = GgufFile::Open(SpmVocab());
  ASSERT_TRUE(vocab.ok());
  spm.vocab_size = 0;
  spm.vocab_from = vocab->get();
  const std::string a = testing::WriteTempModel(TinySpec(1), "eval-vocab-a");
  const std::string b = testing::WriteTempModel(spm, "eval-vocab-b");
  auto base = OpenModel(a, 16, 16);
  auto model = OpenModel(b, 16, 16);
  ASSERT_TRUE(base && model);
  const absl::Status s = CheckSameVocab(base->tokenizer(), model->tokenizer());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::vector<int32_t> tokens = Tokens(*base);
  auto stats = KlDivergence(*base, *model, tokens, *PlanChunks(tokens.size(), 16, 1), 16);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kFailedPrecondition);
}

// The committed llama-perplexity numbers (tests/data/eval/generate.sh).
struct PplCase {
  std::string name, args, model_path;
  double llama_cpp_ppl = 0;
  int32_t ctx = 0, chunks = 0;
};

std::vector<PplCase> LoadPplCases() {
  const auto j = nlohmann::json::parse(
      testing::ReadFile(testing::SourcePath("tests/data/eval/ppl_reference.json")));
  std::vector<PplCase> cases;
  for (const auto& c : j["cases"]) {
    PplCase p{c["name"], c["make_model_args"], "", c["llama_cpp_ppl"], j["ctx"], j["chunks"]};
    p.model_path = (std::filesystem::temp_directory_path() /
                    ("tessera-eval-" + p.name + "-" + std::to_string(::getpid()) + ".gguf"))
                       .string();
    const std::string command = std::string(TESSERA_BINARY_DIR) + "/tools/tessera-make-model " +
                                p.args + " --vocab-from " + SpmVocab() + " --out " + p.model_path +
                                " > /dev/null";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    testing::ProcessTempFiles().Add(p.model_path);
    cases.push_back(p);
  }
  return cases;
}

double TesseraPpl(const PplCase& c) {
  auto model = OpenModel(c.model_path, c.ctx, c.ctx);
  if (!model) return 0;
  const std::vector<int32_t> tokens = Tokens(*model);
  auto stats = Perplexity(*model, tokens, *PlanChunks(tokens.size(), c.ctx, c.chunks), c.ctx);
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? stats->Value() : 0;
}

TEST(EvalPpl, MatchesCommittedLlamaPerplexity) {
  const std::vector<PplCase> cases = LoadPplCases();
  ASSERT_EQ(cases.size(), 2u);
  for (const PplCase& c : cases) {
    const double got = TesseraPpl(c);
    EXPECT_NEAR(got, c.llama_cpp_ppl, 0.01 * c.llama_cpp_ppl) << c.name;
  }
}

// The llama.cpp folder to run: /work/shared/tools/llama.cpp, or on AMX
// CPUs a view of it without the CPU variant that stops with SIGILL on
// quantized models (scripts/lib/llama-view.sh), made once per process.
const std::string& LlamaDir() {
  static const std::string dir = [] {
    const std::string view = std::filesystem::temp_directory_path() /
                             ("tessera-llama-view-" + std::to_string(::getpid()));
    testing::ProcessTempFiles().Add(view);
    std::string out;
    FILE* pipe = ::popen((std::string(TESSERA_SOURCE_DIR) +
                          "/scripts/lib/llama-view.sh /work/shared/tools/llama.cpp " + view)
                             .c_str(),
                         "r");
    if (pipe == nullptr) return std::string("/work/shared/tools/llama.cpp");
    char buf[512];
    while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
    ::pclose(pipe);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.empty() ? std::string("/work/shared/tools/llama.cpp") : out;
  }();
  return dir;
}

// Runs a llama.cpp tool (under LlamaDir()/bin) and returns its stdout and
// stderr, written to a file: llama.cpp's log thread loses its last lines at
// exit more often when it writes to a pipe.
std::string RunLlamaCpp(const std::string& args) {
  const std::string out_path = std::filesystem::temp_directory_path() /
                               ("tessera-llama-out-" + std::to_string(::getpid()) + ".txt");
  testing::ProcessTempFiles().Add(out_path);
  const std::string command = "LD_LIBRARY_PATH=" + LlamaDir() + "/lib:" + LlamaDir() + "/bin " +
                              LlamaDir() + "/bin/" + args + " > " + out_path + " 2>&1";
  const int status = std::system(command.c_str());
  std::string output;
  if (FILE* f = std::fopen(out_path.c_str(), "rb")) {
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof(buf), f)) output.append(buf, n);
    std::fclose(f);
  }
  if (status != 0) output += "\n[exit status " + std::to_string(status) + "]\n";
  return output;
}

// The number after `label` in llama-perplexity's output, or -1.
double LlamaValue(const std::string& output, const std::string& label) {
  const size_t at = output.find(label);
  return at == std::string::npos ? -1.0 : std::stod(output.substr(at + label.size()));
}

// llama.cpp's asynchronous log loses its last lines at exit (exit status 0)
// when its thread is not scheduled in time: a third of runs on a loaded
// 2-core machine. So a run whose output lacks `label` is repeated.
double LlamaValueRetried(const std::string& args, const std::string& label) {
  std::string output;
  for (int attempt = 0; attempt < 20; ++attempt) {
    output = RunLlamaCpp(args);
    const double v = LlamaValue(output, label);
    if (v >= 0) return v;
  }
  std::fprintf(stderr, "last output of %s:\n%s\n", args.c_str(),
               output.substr(output.size() > 3000 ? output.size() - 3000 : 0).c_str());
  return -1.0;
}

// Runs llama-perplexity itself, when the llama.cpp build is present.
TEST(EvalPpl, MatchesLiveLlamaPerplexity) {
  if (!std::filesystem::exists(kLlamaPerplexity)) GTEST_SKIP() << "no " << kLlamaPerplexity;
  for (const PplCase& c : LoadPplCases()) {
    const double want = LlamaValueRetried("llama-perplexity -m " + c.model_path + " -f " +
                                              TextPath() + " -c " + std::to_string(c.ctx) +
                                              " --chunks " + std::to_string(c.chunks) + " -t 2",
                                          "Final estimate: PPL = ");
    ASSERT_GT(want, 0) << "no estimate from llama-perplexity";
    EXPECT_NEAR(TesseraPpl(c), want, 0.01 * want) << c.name;
  }
}

// Models quantized by llama-quantize: Tessera's KL divergence from the f16
// model is within 10% of llama-perplexity --kl-divergence's on the same files
// (each against its own f16 logits), when the llama.cpp build is present.
TEST(EvalKld, QuantizedMatchesLiveLlamaPerplexity) {
  if (!std::filesystem::exists(kLlamaPerplexity)) GTEST_SKIP() << "no " << kLlamaPerplexity;
  RandomModelSpec spec = TinySpec(3);
  spec.dim = 256;  // K-quants need rows of 256
  spec.layers = 1;
  spec.ffn = 512;
  spec.vocab_size = 1024;
  spec.output_std = 0.2f;
  spec.dtype = GgmlType::kF16;
  const std::string f16 = testing::WriteTempModel(spec, "eval-q-f16");
  const std::string kld_file = f16 + ".kld";
  testing::ProcessTempFiles().Add(kld_file);
  constexpr int32_t kCtx = 64, kChunks = 6;
  const std::string ctx = " -c " + std::to_string(kCtx) + " -b " + std::to_string(kCtx) + " -t 2";
  RunLlamaCpp("llama-perplexity -m " + f16 + " --kl-divergence-base " + kld_file + " -f " +
              TextPath() + ctx + " --chunks " + std::to_string(kChunks));
  ASSERT_TRUE(std::filesystem::exists(kld_file));
  for (const char* type : {"Q8_0", "Q4_K_M"}) {
    const std::string q = f16 + "." + type + ".gguf";
    testing::ProcessTempFiles().Add(q);
    RunLlamaCpp("llama-quantize " + f16 + " " + q + " " + type);
    const double want = LlamaValueRetried(
        "llama-perplexity -m " + q + " --kl-divergence-base " + kld_file + " --kl-divergence" + ctx,
        "Mean    KLD: ");
    ASSERT_GT(want, 0) << "no KL divergence from llama-perplexity for " << type;
    auto base = OpenModel(f16, kCtx, kCtx);
    auto model = OpenModel(q, kCtx, kCtx);
    ASSERT_TRUE(base && model);
    const std::vector<int32_t> tokens = Tokens(*base);
    auto stats =
        KlDivergence(*base, *model, tokens, *PlanChunks(tokens.size(), kCtx, kChunks), kCtx);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->count(), size_t(kChunks * (kCtx / 2 - 1)));
    std::printf("%s: KLD Tessera %.6f, llama.cpp %.6f\n", type, stats->kld.Mean(), want);
    EXPECT_NEAR(stats->kld.Mean(), want, 0.1 * want) << type;
  }
}

}  // namespace
}  // namespace tessera::eval
