// Per-element math of the CUDA kernels, written once for the device and for
// their CPU twins (twins.cc), so the CPU parity tests run the same
// arithmetic. No CUDA headers: under nvcc the functions are
// __host__ __device__, under a plain C++ compiler they are ordinary inlines.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TESSERA_HD __host__ __device__ __forceinline__
#else
#define TESSERA_HD inline
#endif

namespace tessera::cuda {

// silu(g) · u, the SwiGLU gate.
TESSERA_HD float SwiGluOf(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// GELU, tanh approximation (GPT-2's).
TESSERA_HD float GeluTanhOf(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

// gelu_tanh(g) · u, Gemma's gate.
TESSERA_HD float GeGluOf(float gate, float up) { return GeluTanhOf(gate) * up; }

// cap · tanh(x / cap), final logit soft-capping (inv_cap = 1 / cap).
TESSERA_HD float SoftcapOf(float x, float cap, float inv_cap) { return cap * tanhf(x * inv_cap); }

// RoPE angle of pair p at `position`: position · freq_scale ·
// base^(-2p / rot_dim) / factor, in double (as the CPU backend's table),
// then (cos, sin) rounded to float.
TESSERA_HD void RopeCosSinExt(int32_t position, int32_t pair, int32_t rot_dim, float base,
                              float freq_scale, float factor, float* cs, float* sn,
                              float mscale = 1.0f) {
  const double theta = position * static_cast<double>(freq_scale) *
                       pow(static_cast<double>(base), -2.0 * pair / static_cast<double>(rot_dim)) /
                       static_cast<double>(factor);
  *cs = static_cast<float>(cos(theta) * mscale);
  *sn = static_cast<float>(sin(theta) * mscale);
}

TESSERA_HD void RopeCosSin(int32_t position, int32_t pair, int32_t rot_dim, float base, float* cs,
                           float* sn) {
  RopeCosSinExt(position, pair, rot_dim, base, 1.0f, 1.0f, cs, sn);
}

// Rotates (x[0], x[offset]) by the angle whose (cos, sin) is given: offset 1
// for adjacent pairs, rot_dim / 2 for NEOX.
TESSERA_HD void RopeRotateAt(float* x, int32_t offset, float cs, float sn) {
  const float a = x[0], b = x[offset];
  x[0] = a * cs - b * sn;
  x[offset] = a * sn + b * cs;
}

// Rotates the adjacent pair (x[0], x[1]) by the angle whose (cos, sin) is given.
TESSERA_HD void RopeRotate(float* x, float cs, float sn) {
  const float a = x[0], b = x[1];
  x[0] = a * cs - b * sn;
  x[1] = a * sn + b * cs;
}

// Keys query row t (0-based among a sequence's q_len new rows) may attend
// to: causal, offset by the kv_len - q_len tokens cached before this step;
// the padding mask hides everything past kv_len.
TESSERA_HD int32_t VisibleKeys(int32_t kv_len, int32_t q_len, int32_t t) {
  const int32_t causal = kv_len - q_len + t + 1;
  return causal < kv_len ? causal : kv_len;
}

// First key a query at `position` sees with a sliding window of `window`
// keys (0: none): positions (position - window, position].
TESSERA_HD int32_t FirstVisibleKey(int32_t position, int32_t window) {
  if (window <= 0) return 0;
  const int32_t first = position - window + 1;
  return first > 0 ? first : 0;
}

// Decode attention splits every sequence's keys into fixed chunks of this
// many keys, whatever the batch: the partial softmaxes, and so the result,
// depend only on the sequence itself.
constexpr int32_t kDecodeSplitKeys = 256;

TESSERA_HD int32_t NumDecodeSplits(int32_t kv_len) {
  return (kv_len + kDecodeSplitKeys - 1) / kDecodeSplitKeys;
}

// Merges a split's partial softmax (max m, sum of exp l) into the running
// (max, scale factors): returns the weight of the split's sums when the
// global max is `global_max`.
TESSERA_HD float SplitWeight(float split_max, float global_max) {
  return split_max == -INFINITY ? 0.0f : expf(split_max - global_max);
}

}  // namespace tessera::cuda
