// Quantization of the K types with ggml's reference rules (no importance
// matrix), evaluated in the same order and precision as ggml so that the
// bytes match; built with -ffp-contract=off.
//
// Q4_K / Q5_K: every 32-element sub-block gets a scale and a min from a
// weighted least-squares search over 21 (16) candidate scales, weights
// sqrt(mean x²) + |x|; the eight scales and mins are then quantized to 6 bits
// against the super-block's d = max scale / 63 and dmin = max min / 63, and
// the elements are requantized with the rounded scales.
// Q6_K: every 16-element sub-block gets a signed scale from a search over 19
// candidates weighted by x²; the sixteen scales become int8 against
// d = max scale / -128.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/model/float16.h"
#include "engine/quant/blocks.h"
#include "engine/quant/quantize_internal.h"

namespace tessera::quant::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;
constexpr int kSub = 32;  // sub-block of Q4_K / Q5_K
constexpr int kSubs = kQKK / kSub;

inline int Clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// Weighted squared error of x ≈ scale · l + min.
float WeightedError(const float* x, const float* w, const uint8_t* l, float scale, float min,
                    int n) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    float diff = scale * static_cast<float>(l[i]) + min - x[i];
    diff = diff * diff;
    err += w[i] * diff;
  }
  return err;
}

struct SearchParams {
  int nmax;      // 15 or 31
  float rmin;    // first candidate: (nmax + rmin) / range
  float rdelta;  // step between candidates
  int nstep;     // candidates after the first: nstep + 1 of them
};

// x ≈ scale · L + min with L in [0, nmax] and min ≤ 0: starts from the
// min/max fit, then tries each candidate inverse scale, refits scale and min
// by weighted least squares on its levels and keeps the best. Returns the
// scale; *neg_min = −min.
float SearchScaleMin(const float* x, const float* w, const SearchParams& p, uint8_t* L,
                     float* neg_min) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < kSub; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::memset(L, 0, kSub);
    *neg_min = -min;
    return 0.0f;
  }
  const float nmax = static_cast<float>(p.nmax);
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < kSub; ++i) {
    L[i] = static_cast<uint8_t>(Clamp(NearestInt(iscale * (x[i] - min)), 0, p.nmax));
  }
  float best = WeightedError(x, w, L, scale, min, kSub);
  uint8_t trial[kSub];
  for (int is = 0; is <= p.nstep; ++is) {
    iscale = (p.rmin + p.rdelta * static_cast<float>(is) + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < kSub; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, p.nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float err = WeightedError(x, w, trial, this_scale, this_min, kSub);
    if (err < best) {
      std::memcpy(L, trial, kSub);
      best = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// Sub-block j's 6-bit scale and min into the 12 packed bytes (UnpackScaleMin
// reads them back); sub-blocks 0..3 must be stored before 4..7.
void PackScaleMin(int j, uint8_t ls, uint8_t lm, uint8_t* q) {
  if (j < 4) {
    q[j] = ls;
    q[j + 4] = lm;
  } else {
    q[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    q[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
    q[j] |= static_cast<uint8_t>((lm >> 4) << 6);
  }
}

// One Q4_K / Q5_K super-block's levels L[256] (0..nmax) and its d, dmin and
// packed scales.
void QuantizeK45Block(const float* x, const SearchParams& p, uint8_t* L, uint16_t* d_out,
                      uint16_t* dmin_out, uint8_t* packed) {
  float scales[kSubs], mins[kSubs], weights[kSub];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kSubs; ++j) {
    const float* xs = x + kSub * j;
    float sum_x2 = 0;
    for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / kSub);
    for (int l = 0; l < kSub; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = SearchScaleMin(xs, weights, p, L + kSub * j, &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kSubs; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
    PackScaleMin(j, ls, lm, packed);
  }
  *d_out = FloatToHalf(max_scale / 63.f);
  *dmin_out = FloatToHalf(max_min / 63.f);
  // Requantize with the scales as stored; a sub-block whose scale rounded to
  // zero keeps the levels of its search.
  const float d_all = HalfToFloat(*d_out), dmin_all = HalfToFloat(*dmin_out);
  for (int j = 0; j < kSubs; ++j) {
    uint8_t sc, m;
    UnpackScaleMin(j, packed, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(m);
    for (int i = 0; i < kSub; ++i) {
      const int l = NearestInt((x[kSub * j + i] + dm) / d);
      L[kSub * j + i] = static_cast<uint8_t>(Clamp(l, 0, p.nmax));
    }
  }
}

// Q6_K's sub-block search: x ≈ scale · (L − 32), L in [0, 63], weighted by
// x², over inverse scales −(32 + 0.1 · is) / max for is in −9..9. Returns the
// scale (0 for an all-zero sub-block).
float SearchSignedScale(const float* x, int n, int8_t* L) {
  constexpr int nmax = 32;
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, n);
    return 0.0f;
  }
  // Sums of the fit for inverse scale iscale; fills L when asked.
  auto fit = [&](float iscale, float* sumlx, float* suml2, bool store) {
    *sumlx = 0;
    *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      if (store) L[i] = static_cast<int8_t>(l + nmax);
      const float w = x[i] * x[i];
      const float fl = static_cast<float>(l);
      *sumlx += w * x[i] * fl;
      *suml2 += w * fl * fl;
    }
  };
  float sumlx, suml2;
  fit(-static_cast<float>(nmax) / max, &sumlx, &suml2, true);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    fit(iscale, &sumlx, &suml2, false);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      fit(iscale, &sumlx, &suml2, true);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

void QuantizeQ4K(const float* x, BlockQ4_K* y, int64_t nb) {
  const SearchParams params{15, -1.0f, 0.1f, 20};
  uint8_t L[kQKK];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    QuantizeK45Block(x, params, L, &y[i].d, &y[i].dmin, y[i].scales);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQKK; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void QuantizeQ5K(const float* x, BlockQ5_K* y, int64_t nb) {
  const SearchParams params{31, -0.5f, 0.1f, 15};
  uint8_t L[kQKK];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    QuantizeK45Block(x, params, L, &y[i].d, &y[i].dmin, y[i].scales);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, kQKK / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < kQKK; n += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j], l2 = L[n + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
}

namespace {

void PackQ6K(const int8_t* L, BlockQ6_K* b) {
  uint8_t* ql = b->ql;
  uint8_t* qh = b->qh;
  for (int j = 0; j < kQKK; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                   ((q4 >> 4) << 6));
    }
  }
}

}  // namespace

void QuantizeQ6K(const float* x, BlockQ6_K* y, int64_t nb) {
  constexpr int kSubs6 = kQKK / 16;
  int8_t L[kQKK];
  float scales[kSubs6];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kSubs6; ++ib) {
      scales[ib] = SearchSignedScale(x + 16 * ib, 16, L + 16 * ib);
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = FloatToHalf(1 / iscale);
    for (int ib = 0; ib < kSubs6; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    }
    const float d_all = HalfToFloat(y[i].d);
    for (int j = 0; j < kSubs6; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = Clamp(NearestInt(x[16 * j + ii] / d), -32, 31);
        L[16 * j + ii] = static_cast<int8_t>(l + 32);
      }
    }
    PackQ6K(L, &y[i]);
  }
}

}  // namespace tessera::quant::internal
