// The device sampler's CPU twin against the engine's sampler
// (engine/sampler/), given the same seed: the twin draws with the uniform
// number the request's RNG would give (mt19937_64, 53 bits), and must pick
// the very token SequenceSampler picks, for greedy, plain temperature and
// top-k (+ top-p, min-p) rows. The GPU test (tests/gpu/sampling_test.cc)
// ties the kernel to this twin.
#include <random>
#include <vector>

#include "engine/backend/cuda/sampling_params.h"
#include "engine/backend/cuda/twins.h"
#include "engine/sampler/sampler.h"
#include "gtest/gtest.h"

namespace tessera::cuda {
namespace {

// The request RNG's n-th uniform (SequenceSampler::NextUniform).
class Uniforms {
 public:
  explicit Uniforms(uint64_t seed) : rng_(seed) {}
  double Next() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 rng_;
};

std::vector<float> RandomLogits(int32_t vocab, std::mt19937_64& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(vocab);
  for (float& x : v) x = dist(rng);
  return v;
}

void CheckAgainstSequenceSampler(SamplingParams params, int32_t vocab, float scale) {
  params.has_seed = true;
  std::mt19937_64 rng(params.seed * 7 + vocab);
  SequenceSampler cpu(params, {}, vocab);
  Uniforms uniforms(params.seed);
  const DeviceSamplingParams device{params.temperature, params.top_k, params.top_p, params.min_p,
                                    0.0};
  if (!SupportedOnDevice(device, vocab)) return;  // e.g. top-k at or above a tiny vocabulary
  for (int step = 0; step < 120; ++step) {
    std::vector<float> logits = RandomLogits(vocab, rng, scale);
    if (step % 17 == 3) logits[step % vocab] = std::nanf("");
    if (step % 13 == 5) logits[(step * 7) % vocab] = -INFINITY;
    DeviceSamplingParams p = device;
    if (!IsGreedy(p)) p.uniform = uniforms.Next();
    std::vector<float> scratch = logits;  // the CPU sampler edits its row
    const int32_t want = cpu.Sample(std::span<float>(scratch)).token_id;
    ASSERT_EQ(twin::Sample(logits.data(), vocab, p), want)
        << "step " << step << " t " << params.temperature << " k " << params.top_k << " p "
        << params.top_p << " min_p " << params.min_p;
  }
}

TEST(CudaSamplingTwin, GreedyIsTheCpuArgmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  CheckAgainstSequenceSampler(p, 512, 3.0f);
  // Ties go to the lowest id.
  std::vector<float> logits(100, 1.0f);
  EXPECT_EQ(twin::Sample(logits.data(), 100, DeviceSamplingParams{}), 0);
}

TEST(CudaSamplingTwin, SeededDrawsMatchTheCpuSampler) {
  for (int32_t vocab : {7, 512, 32000}) {
    for (uint64_t seed : {1ull, 42ull}) {
      SamplingParams p;
      p.seed = seed;
      p.temperature = 0.8f;
      CheckAgainstSequenceSampler(p, vocab, 2.0f);  // plain
      p.top_k = 40;
      CheckAgainstSequenceSampler(p, vocab, 2.0f);
      p.top_p = 0.9f;
      CheckAgainstSequenceSampler(p, vocab, 2.0f);
      p.min_p = 0.05f;
      CheckAgainstSequenceSampler(p, vocab, 2.0f);
      p.top_k = 1024, p.top_p = 0.5f, p.min_p = 0.0f, p.temperature = 1.7f;
      CheckAgainstSequenceSampler(p, vocab, 1.0f);
    }
  }
}

TEST(CudaSamplingTwin, RowsTheDeviceLeavesToTheHost) {
  EXPECT_TRUE(SupportedOnDevice({0.0f, 0, 0.5f, 0.5f, 0.0}, 100));  // greedy ignores the rest
  EXPECT_TRUE(SupportedOnDevice({1.0f, 0, 1.0f, 0.0f, 0.0}, 100));
  EXPECT_FALSE(SupportedOnDevice({1.0f, 0, 0.9f, 0.0f, 0.0}, 100));  // top-p without top-k
  EXPECT_FALSE(SupportedOnDevice({1.0f, 0, 1.0f, 0.1f, 0.0}, 100));  // min-p without top-k
  EXPECT_FALSE(SupportedOnDevice({1.0f, 2000, 1.0f, 0.0f, 0.0}, 32000));
  EXPECT_TRUE(SupportedOnDevice({1.0f, 1024, 0.9f, 0.1f, 0.0}, 32000));
}

}  // namespace
}  // namespace tessera::cuda
