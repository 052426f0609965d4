// The sampling kernel against its CPU twin (which tests/cuda_sampling_test.cc
// ties to the engine's sampler), on random logits rows of several
// vocabulary sizes. Greedy rows must agree exactly, NaN and −inf included.
// Sampled rows draw with the same uniform number; the device's expf differs
// from the host's by up to 2 ulp, which moves a boundary between two
// tokens' cumulative mass by ~1e-7 of the total, so at least 98% of the
// sampled rows must pick the twin's token (in practice all but a handful).
#include "engine/backend/cuda/sampling.h"

#include <random>

#include "engine/backend/cuda/twins.h"
#include "gpu/gpu_test_util.h"

namespace tessera::cuda {
namespace {

using namespace tessera::cuda::testing;

// Rows of every kind the device takes. A top-k at or above a small
// vocabulary turns top-k off, and top-p or min-p without top-k stays on the
// host (LaunchSample refuses it), so such rows keep their truncation with
// k = vocab - 1.
std::vector<DeviceSamplingParams> Params(int32_t rows, int32_t vocab, std::mt19937_64& rng) {
  const std::vector<DeviceSamplingParams> kinds = {
      {0.0f, 0, 1.0f, 0.0f, 0.0},  {0.7f, 0, 1.0f, 0.0f, 0.0},      {1.0f, 40, 1.0f, 0.0f, 0.0},
      {0.9f, 50, 0.9f, 0.0f, 0.0}, {1.2f, 1024, 0.95f, 0.02f, 0.0}, {0.5f, 1, 1.0f, 0.0f, 0.0},
      {1.0f, 100, 1.0f, 0.1f, 0.0}};
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<DeviceSamplingParams> params;
  for (int32_t r = 0; r < rows; ++r) {
    DeviceSamplingParams p = kinds[r % kinds.size()];
    p.uniform = u(rng);
    if (!SupportedOnDevice(p, vocab)) p.top_k = vocab - 1;
    params.push_back(p);
  }
  return params;
}

TEST(SamplingKernel, MatchesTheTwin) {
  TESSERA_REQUIRE_GPU();
  std::mt19937_64 rng(77);
  for (int32_t vocab : {5, 1000, 32000, 128256}) {
    const int32_t rows = 70;
    std::normal_distribution<float> dist(0.0f, 3.0f);
    std::vector<float> logits(size_t(rows) * vocab);
    for (float& x : logits) x = dist(rng);
    logits[3] = std::nanf("");
    logits[size_t(vocab) + 1] = -INFINITY;
    std::fill(logits.begin() + 7 * vocab, logits.begin() + 8 * vocab, 2.0f);  // all tied
    const std::vector<DeviceSamplingParams> params = Params(rows, vocab, rng);
    DeviceBuffer d_logits = Upload(logits), d_params = Upload(params), d_tokens = Zeros(rows * 4);
    ASSERT_TRUE(LaunchSample(d_logits.as<float>(), rows, vocab, params.data(),
                             d_params.as<DeviceSamplingParams>(), d_tokens.as<int32_t>(), nullptr)
                    .ok());
    const std::vector<int32_t> got = Download<int32_t>(d_tokens, rows);
    int32_t sampled = 0, agree = 0;
    for (int32_t r = 0; r < rows; ++r) {
      const int32_t want = twin::Sample(logits.data() + size_t(r) * vocab, vocab, params[r]);
      if (IsGreedy(params[r])) {
        EXPECT_EQ(got[r], want) << "greedy row " << r << " vocab " << vocab;
      } else {
        ++sampled;
        agree += got[r] == want;
      }
    }
    EXPECT_GE(agree, sampled * 98 / 100) << "vocab " << vocab;
  }
}

TEST(SamplingKernel, RefusesRowsForTheHost) {
  TESSERA_REQUIRE_GPU();
  const std::vector<DeviceSamplingParams> params = {{1.0f, 0, 0.9f, 0.0f, 0.5}};
  EXPECT_EQ(LaunchSample(nullptr, 1, 100, params.data(), nullptr, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::cuda
