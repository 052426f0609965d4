// Dequantization with the reference formulas, evaluated in the same order
// and precision as ggml's dequantize_row_* (this file is built with
// -ffp-contract=off, so no product is fused into an add).
#include <cstring>

#include "engine/model/float16.h"
#include "engine/quant/blocks.h"
#include "engine/quant/quant.h"

namespace tessera::quant {
namespace {

void DequantQ4_0(const BlockQ4_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = HalfToFloat(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantQ4_1(const BlockQ4_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = HalfToFloat(b[i].d), m = HalfToFloat(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

// The 5-bit value j of a Q5 block: nibble plus bit j of qh as bit 4.
inline int Q5Value(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < kQK / 2 ? (qs[j] & 0x0F) : (qs[j - kQK / 2] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

void DequantQ5_0(const BlockQ5_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = HalfToFloat(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, sizeof(qh));
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(Q5Value(b[i].qs, qh, j) - 16) * d;
  }
}

void DequantQ5_1(const BlockQ5_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = HalfToFloat(b[i].d), m = HalfToFloat(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, sizeof(qh));
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(Q5Value(b[i].qs, qh, j)) * d + m;
  }
}

void DequantQ8_0(const BlockQ8_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = HalfToFloat(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// Q4_K and Q5_K: four groups of 64 elements, each two sub-blocks of 32 (the
// low nibbles, then the high nibbles of 32 bytes of qs); Q5_K adds bit
// 2·group (low half) or 2·group + 1 (high half) of qh[l].
template <typename Block, bool kFifthBit>
void DequantK45(const Block* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(b[i].d), min = HalfToFloat(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int group = 0; group < 4; ++group, q += 32) {
      uint8_t sc, m;
      UnpackScaleMin(2 * group, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      UnpackScaleMin(2 * group + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) {
        int lo = q[l] & 0x0F, hi = q[l] >> 4;
        if constexpr (kFifthBit) {
          const uint8_t* qh = b[i].qh;
          lo += (qh[l] >> (2 * group)) & 1 ? 16 : 0;
          hi += (qh[l] >> (2 * group + 1)) & 1 ? 16 : 0;
        }
        y[l] = d1 * static_cast<float>(lo) - m1;
        y[l + 32] = d2 * static_cast<float>(hi) - m2;
      }
      y += 64;
    }
  }
}

// Q6_K: two halves of 128 elements; element l + 32·k of a half takes a
// nibble of ql (low for k = 0, 1; high for k = 2, 3) and bits 2k..2k+1 of qh[l].
void DequantQ6_K(const BlockQ6_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void DequantQ2_K(const BlockQ2_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = HalfToFloat(b[i].d), min = HalfToFloat(b[i].dmin);
    for (int s = 0; s < kQKK / 16; ++s) {
      const float dl = d * static_cast<float>(b[i].scales[s] & 0xF);
      const float ml = min * static_cast<float>(b[i].scales[s] >> 4);
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        y[e] = dl * static_cast<float>(TwoBitsAt(b[i].qs, e)) - ml;
      }
    }
  }
}

void DequantQ3_K(const BlockQ3_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = HalfToFloat(b[i].d);
    for (int s = 0; s < kQKK / 16; ++s) {
      const float dl = d * static_cast<float>(Q3Scale(b[i].scales, s));
      for (int e = 16 * s; e < 16 * s + 16; ++e) {
        const int high = (b[i].hmask[e % 32] >> (e / 32)) & 1;
        y[e] = dl * static_cast<float>(TwoBitsAt(b[i].qs, e) - (high ? 0 : 4));
      }
    }
  }
}

// 32 elements of IQ4 nibbles: low nibbles first, then high, times dl.
inline void Iq4Values(const uint8_t* qs, float dl, float* y) {
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = dl * static_cast<float>(kIq4Values[qs[j] & 0xF]);
    y[j + kQK / 2] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
  }
}

void DequantIQ4_NL(const BlockIQ4_NL* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) Iq4Values(b[i].qs, HalfToFloat(b[i].d), y);
}

void DequantIQ4_XS(const BlockIQ4_XS* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToFloat(b[i].d);
    for (int s = 0; s < kQKK / kQK; ++s, y += kQK) {
      Iq4Values(b[i].qs + 16 * s, d * static_cast<float>(Iq4XsScale(b[i], s)), y);
    }
  }
}

}  // namespace

void DequantizeRow(QuantType type, const void* blocks, float* out, int64_t n) {
  const int64_t nb = n / Info(type).block_elems;
  switch (type) {
    case QuantType::kQ4_0: return DequantQ4_0(static_cast<const BlockQ4_0*>(blocks), nb, out);
    case QuantType::kQ4_1: return DequantQ4_1(static_cast<const BlockQ4_1*>(blocks), nb, out);
    case QuantType::kQ5_0: return DequantQ5_0(static_cast<const BlockQ5_0*>(blocks), nb, out);
    case QuantType::kQ5_1: return DequantQ5_1(static_cast<const BlockQ5_1*>(blocks), nb, out);
    case QuantType::kQ8_0: return DequantQ8_0(static_cast<const BlockQ8_0*>(blocks), nb, out);
    case QuantType::kQ4_K:
      return DequantK45<BlockQ4_K, false>(static_cast<const BlockQ4_K*>(blocks), nb, out);
    case QuantType::kQ5_K:
      return DequantK45<BlockQ5_K, true>(static_cast<const BlockQ5_K*>(blocks), nb, out);
    case QuantType::kQ6_K: return DequantQ6_K(static_cast<const BlockQ6_K*>(blocks), nb, out);
    case QuantType::kQ2_K: return DequantQ2_K(static_cast<const BlockQ2_K*>(blocks), nb, out);
    case QuantType::kQ3_K: return DequantQ3_K(static_cast<const BlockQ3_K*>(blocks), nb, out);
    case QuantType::kIQ4_NL:
      return DequantIQ4_NL(static_cast<const BlockIQ4_NL*>(blocks), nb, out);
    case QuantType::kIQ4_XS:
      return DequantIQ4_XS(static_cast<const BlockIQ4_XS*>(blocks), nb, out);
  }
}

}  // namespace tessera::quant
