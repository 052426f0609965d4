// Quantization of the 32-element block types with ggml's reference rules
// (quantize_row_*_ref, no importance matrix), evaluated in the same order
// and precision so that the bytes match ggml's; this file is built with
// -ffp-contract=off. The K types are in quantize_k.cc.
//
//   Q4_0 / Q5_0: d = (the element of largest magnitude, with its sign) / -8
//                or / -16; q = trunc(x / d + 8.5) (+ 16.5), at most 15 (31).
//   Q4_1 / Q5_1: d = (max − min) / 15 (31), m = min; q = trunc((x − m) / d + 0.5).
//   Q8_0:        d = max |x| / 127; q = roundf(x / d).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/model/float16.h"
#include "engine/quant/blocks.h"
#include "engine/quant/quant.h"
#include "engine/quant/quantize_internal.h"

namespace tessera::quant {
namespace {

// The element of largest magnitude, keeping its sign; the first one wins ties.
float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

inline float Inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// Sets bit j of qh from bit 4 of the 5-bit value q.
inline void SetHighBit(uint32_t* qh, int q, int j) {
  *qh |= ((static_cast<uint32_t>(q) & 0x10u) >> 4) << j;
}

void QuantQ4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = SignedAbsMax(x, kQK) / -8.0f;
    const float id = Inverse(d);
    y[i].d = FloatToHalf(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantQ4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    MinMax(x, kQK, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = Inverse(d);
    y[i].d = FloatToHalf(d);
    y[i].m = FloatToHalf(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantQ5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = SignedAbsMax(x, kQK) / -16.0f;
    const float id = Inverse(d);
    y[i].d = FloatToHalf(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      const int q1 = std::min(31, static_cast<int>(x[j + kQK / 2] * id + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      SetHighBit(&qh, q0, j);
      SetHighBit(&qh, q1, j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

void QuantQ5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min, max;
    MinMax(x, kQK, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = Inverse(d);
    y[i].d = FloatToHalf(d);
    y[i].m = FloatToHalf(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
      const int q1 = static_cast<uint8_t>((x[j + kQK / 2] - min) * id + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      SetHighBit(&qh, q0, j);
      SetHighBit(&qh, q1, j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

void QuantQ8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = Inverse(d);
    y[i].d = FloatToHalf(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

}  // namespace

void QuantizeRow(QuantType type, const float* in, void* blocks, int64_t n) {
  const int64_t nb = n / Info(type).block_elems;
  switch (type) {
    case QuantType::kQ4_0: return QuantQ4_0(in, static_cast<BlockQ4_0*>(blocks), nb);
    case QuantType::kQ4_1: return QuantQ4_1(in, static_cast<BlockQ4_1*>(blocks), nb);
    case QuantType::kQ5_0: return QuantQ5_0(in, static_cast<BlockQ5_0*>(blocks), nb);
    case QuantType::kQ5_1: return QuantQ5_1(in, static_cast<BlockQ5_1*>(blocks), nb);
    case QuantType::kQ8_0: return QuantQ8_0(in, static_cast<BlockQ8_0*>(blocks), nb);
    case QuantType::kQ4_K:
      return internal::QuantizeQ4K(in, static_cast<BlockQ4_K*>(blocks), nb);
    case QuantType::kQ5_K:
      return internal::QuantizeQ5K(in, static_cast<BlockQ5_K*>(blocks), nb);
    case QuantType::kQ6_K:
      return internal::QuantizeQ6K(in, static_cast<BlockQ6_K*>(blocks), nb);
    case QuantType::kQ2_K:
    case QuantType::kQ3_K:
    case QuantType::kIQ4_NL:
    case QuantType::kIQ4_XS:
      std::memset(blocks, 0, static_cast<size_t>(nb * Info(type).block_bytes));
      return;
  }
}

bool CanQuantize(QuantType type) { return type <= QuantType::kQ6_K; }

}  // namespace tessera::quant
