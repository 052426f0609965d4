// Rows of quantized blocks as integers plus one affine map per group (see
// AffineRow): the form the integer matrix kernels consume.
#include <cstring>

#include "engine/model/float16.h"
#include "engine/quant/blocks.h"
#include "engine/quant/quant.h"

namespace tessera::quant {
namespace {

// The 32 values of a _0/_1 block: low nibbles are elements 0..15, high
// nibbles 16..31; Q5 adds bit j of qh as bit 4 of element j.
void Unpack32(const uint8_t* qs, const uint8_t* qh_bytes, uint8_t* q) {
  uint32_t qh = 0;
  if (qh_bytes != nullptr) std::memcpy(&qh, qh_bytes, sizeof(qh));
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = static_cast<uint8_t>((qs[j] & 0x0F) | (((qh >> j) & 1u) << 4));
    q[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}

template <typename Block, bool kFifthBit>
void UnpackK45(const Block& blk, uint8_t* q, float* a, float* b) {
  const float d = HalfToFloat(blk.d), dmin = HalfToFloat(blk.dmin);
  for (int group = 0; group < 4; ++group) {
    for (int half = 0; half < 2; ++half) {
      uint8_t sc, m;
      UnpackScaleMin(2 * group + half, blk.scales, &sc, &m);
      a[2 * group + half] = d * sc;
      b[2 * group + half] = -(dmin * m);
      for (int l = 0; l < 32; ++l) {
        int v = half == 0 ? (blk.qs[32 * group + l] & 0x0F) : (blk.qs[32 * group + l] >> 4);
        if constexpr (kFifthBit) v += ((blk.qh[l] >> (2 * group + half)) & 1) << 4;
        q[64 * group + 32 * half + l] = static_cast<uint8_t>(v);
      }
    }
  }
}

void UnpackQ6K(const BlockQ6_K& blk, uint8_t* q, float* a, float* b) {
  const float d = HalfToFloat(blk.d);
  for (int s = 0; s < kQKK / 16; ++s) {
    a[s] = d * static_cast<float>(blk.scales[s]);
    b[s] = -32.0f * a[s];
  }
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = blk.ql + 64 * half;
    const uint8_t* qh = blk.qh + 32 * half;
    uint8_t* out = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
      out[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      out[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      out[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

template <typename Block>
const Block* Blocks(const void* p) {
  return static_cast<const Block*>(p);
}

}  // namespace

AffineRow AffineFormOf(QuantType type) {
  return AffineRow{type == QuantType::kQ6_K ? 16 : 32, type == QuantType::kQ8_0};
}

void UnpackAffine(QuantType type, const void* blocks, int64_t n, uint8_t* q, float* a, float* b) {
  const int64_t nb = n / Info(type).block_elems;
  for (int64_t i = 0; i < nb; ++i) {
    switch (type) {
      case QuantType::kQ4_0: {
        const BlockQ4_0& blk = Blocks<BlockQ4_0>(blocks)[i];
        Unpack32(blk.qs, nullptr, q + 32 * i);
        a[i] = HalfToFloat(blk.d), b[i] = -8.0f * a[i];
        break;
      }
      case QuantType::kQ4_1: {
        const BlockQ4_1& blk = Blocks<BlockQ4_1>(blocks)[i];
        Unpack32(blk.qs, nullptr, q + 32 * i);
        a[i] = HalfToFloat(blk.d), b[i] = HalfToFloat(blk.m);
        break;
      }
      case QuantType::kQ5_0: {
        const BlockQ5_0& blk = Blocks<BlockQ5_0>(blocks)[i];
        Unpack32(blk.qs, blk.qh, q + 32 * i);
        a[i] = HalfToFloat(blk.d), b[i] = -16.0f * a[i];
        break;
      }
      case QuantType::kQ5_1: {
        const BlockQ5_1& blk = Blocks<BlockQ5_1>(blocks)[i];
        Unpack32(blk.qs, blk.qh, q + 32 * i);
        a[i] = HalfToFloat(blk.d), b[i] = HalfToFloat(blk.m);
        break;
      }
      case QuantType::kQ8_0: {
        const BlockQ8_0& blk = Blocks<BlockQ8_0>(blocks)[i];
        std::memcpy(q + 32 * i, blk.qs, 32);
        a[i] = HalfToFloat(blk.d), b[i] = 0.0f;
        break;
      }
      case QuantType::kQ4_K:
        UnpackK45<BlockQ4_K, false>(Blocks<BlockQ4_K>(blocks)[i], q + 256 * i, a + 8 * i, b + 8 * i);
        break;
      case QuantType::kQ5_K:
        UnpackK45<BlockQ5_K, true>(Blocks<BlockQ5_K>(blocks)[i], q + 256 * i, a + 8 * i, b + 8 * i);
        break;
      case QuantType::kQ6_K:
        UnpackQ6K(Blocks<BlockQ6_K>(blocks)[i], q + 256 * i, a + 16 * i, b + 16 * i);
        break;
    }
  }
}

}  // namespace tessera::quant
