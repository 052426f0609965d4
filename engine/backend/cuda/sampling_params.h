// Sampling on the device: the parameters of one row, and which rows the
// device path takes. Pure C++, shared by the kernel, its CPU twin and the
// tests.
//
// The device follows engine/sampler/'s order and tie rules exactly:
// temperature → top-k → min-p → top-p → one draw. The draw uses a uniform
// number from the request's own RNG (SequenceSampler's NextUniform: 53 bits
// of its mt19937_64), drawn on the host and passed in, so a seeded request
// draws the same number on either path. Greedy rows are exact: the largest
// logit, lowest id among ties, NaN never wins. Sampled rows pick the same
// token as the CPU unless the draw lands within rounding (a few ulp of the
// device's expf, and sums in another association) of a boundary between two
// tokens' cumulative probabilities.
//
// The device path takes: greedy rows; plain temperature sampling; and
// top-k with 1 ≤ k ≤ kMaxDeviceTopK, optionally with top-p and min-p on
// those k. Penalties, logprobs, and top-p or min-p without top-k stay on
// the host (SupportedOnDevice says which).
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/backend/cuda/math.h"

namespace tessera::cuda {

constexpr int32_t kMaxDeviceTopK = 1024;
// Threads of the sampling kernel: thread t owns the t-th of kSampleThreads
// contiguous chunks of the vocabulary (the twin uses the same chunks).
constexpr int32_t kSampleThreads = 1024;

struct DeviceSamplingParams {
  float temperature = 0.0f;  // <= 0 (or not finite): greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  double uniform = 0.0;      // in [0, 1), from the request's RNG
};

TESSERA_HD bool IsGreedy(const DeviceSamplingParams& p) {
  return !(p.temperature > 0.0f && p.temperature < INFINITY);
}

// The draw from `n` candidates (value, id) in Better order, compacted in
// place: exp(v - max),
// min-p, top-p over the pre-min-p total, then the walk to u · sum. Shared by
// the kernel (one thread) and the twin, and written as SampleTruncated is.
TESSERA_HD int32_t TruncatedDraw(float* vals, int32_t* ids, int32_t n, float max,
                                 const DeviceSamplingParams& p) {
  double total = 0.0;
  for (int32_t j = 0; j < n; ++j) {
    vals[j] = expf(vals[j] - max);
    total += vals[j];
  }
  if (p.min_p > 0.0f) {
    const float threshold = p.min_p < 1.0f ? p.min_p : 1.0f;
    int32_t count = 0;
    for (int32_t j = 0; j < n; ++j) {
      if (vals[j] >= threshold) vals[count] = vals[j], ids[count++] = ids[j];
    }
    n = count;
  }
  if (p.top_p < 1.0f) {
    const double target = static_cast<double>(p.top_p) * total;
    double cum = 0.0;
    for (int32_t j = 0; j < n; ++j) {
      cum += vals[j];
      if (cum >= target) {
        n = j + 1;
        break;
      }
    }
  }
  double sum = 0.0;
  for (int32_t j = 0; j < n; ++j) sum += vals[j];
  const double target = p.uniform * sum;
  double cum = 0.0;
  for (int32_t j = 0; j < n; ++j) {
    cum += vals[j];
    if (cum > target) return ids[j];
  }
  return ids[n - 1];
}

inline bool SupportedOnDevice(const DeviceSamplingParams& p, int32_t vocab) {
  if (IsGreedy(p)) return true;
  const bool top_k = p.top_k > 0 && p.top_k < vocab;
  if (top_k) return p.top_k <= kMaxDeviceTopK;
  return !(p.top_p < 1.0f) && !(p.min_p > 0.0f);
}

}  // namespace tessera::cuda
