// Per-element dequantization of GGUF blocks and the per-lane loop of the
// quantized GEMV (quant_gemv.cu), written once for the device and the host,
// as math.h is: under nvcc the functions are __host__ __device__, under a
// plain C++ compiler ordinary inlines, so CPU tests run the very code the
// kernels run (tests/cuda_twins_test.cc checks it against
// quant::DequantizeRow bit for bit, and emulates the warp's 32 lanes).
//
// Layout of a quantized weight on the device: exactly the file's bytes,
// row-major [rows, cols]; row r starts at byte r · RowBytes(cols) and is
// cols / block_elems blocks back to back (blocks.h gives each block's
// fields). Block sizes are even and rows start on even bytes, so the f16
// fields are 2-byte aligned; other fields are read byte by byte (Q5's qh
// is not 4-byte aligned).
//
// Exactness: every value equals engine/quant/dequantize.cc's reference
// formula, in the same order of operations. The device would otherwise fuse
// a product and an add into one FMA (one rounding instead of two); MulRn,
// AddRn and SubRn forbid that (__fmul_rn and friends are never contracted).
// (With finite scales every product here is exact in float, an f16 times
// integers of at most 13 bits, so a fused add would round the same; the
// guarantee should not rest on that.)
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/backend/cuda/math.h"
#include "engine/quant/blocks.h"
#include "engine/model/float16.h"
#include "engine/quant/quant.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace tessera::cuda {

// Rows of activations the GEMV takes in one launch (decode batches); more
// go through dequantization and cuBLAS.
constexpr int32_t kQuantGemvMaxRows = 8;

// A product, sum and difference each rounded once to float, never fused.
TESSERA_HD float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  volatile float p = a * b;  // the store rounds and keeps the compiler from fusing
  return p;
#endif
}
TESSERA_HD float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  volatile float s = a + b;
  return s;
#endif
}
TESSERA_HD float SubRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  volatile float s = a - b;
  return s;
#endif
}

// IEEE binary16 bits to float (exact, subnormals included).
TESSERA_HD float HalfBits(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return HalfToFloat(h);
#endif
}

// Scale (sc) and min (m) of sub-block j of a Q4_K/Q5_K block, as
// quant::UnpackScaleMin (blocks.h) unpacks them.
TESSERA_HD void KScaleMin(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Nibble j of a 32-element block: low nibbles of qs[0..15] are elements
// 0..15, high nibbles elements 16..31.
TESSERA_HD int Nibble32(const uint8_t* qs, int j) {
  return j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
}

// Bit j of a Q5 block's qh (four bytes, little-endian) as bit 4 of the value.
TESSERA_HD int FifthBit(const uint8_t* qh, int j) { return ((qh[j >> 3] >> (j & 7)) & 1) << 4; }

// Element e (0..255) of a Q4_K or Q5_K block: group g = e / 64 holds
// sub-blocks 2g (low nibbles of qs[32g..32g+31]) and 2g + 1 (high nibbles);
// Q5_K's fifth bit of element l of sub-block s is bit s of qh[l].
template <bool kFifthBit, typename Block>
TESSERA_HD float DequantK45(const Block* b, int e) {
  const int group = e >> 6, high = (e >> 5) & 1, l = e & 31, sub = 2 * group + high;
  int sc, m;
  KScaleMin(sub, b->scales, &sc, &m);
  const float d1 = MulRn(HalfBits(b->d), static_cast<float>(sc));
  const float m1 = MulRn(HalfBits(b->dmin), static_cast<float>(m));
  const uint8_t byte = b->qs[32 * group + l];
  int q = high ? byte >> 4 : byte & 0x0F;
  if constexpr (kFifthBit) q += ((b->qh[l] >> sub) & 1) ? 16 : 0;
  return SubRn(MulRn(d1, static_cast<float>(q)), m1);
}

// Element e (0..255) of a Q6_K block: half h = e / 128; within it, element
// l + 32k takes the low (k < 2) or high nibble of ql[64h + l + 32(k & 1)]
// and bits 2k..2k+1 of qh[32h + l]; its scale is scales[8h + l / 16 + 2k].
TESSERA_HD float DequantQ6K(const quant::BlockQ6_K* b, int e) {
  const int h = e >> 7, k = (e >> 5) & 3, l = e & 31;
  const uint8_t lo = b->ql[64 * h + l + 32 * (k & 1)];
  const int nibble = k < 2 ? (lo & 0x0F) : (lo >> 4);
  const int q = (nibble | (((b->qh[32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
  const float sc = static_cast<float>(b->scales[8 * h + l / 16 + 2 * k]);
  return MulRn(MulRn(HalfBits(b->d), sc), static_cast<float>(q));
}

// Bits 2k..2k+1 of qs[32h + l]: the two low bits of element e = 128h + 32k
// + l (0..255) of a Q2_K or Q3_K block, as quant::TwoBitsAt reads them.
TESSERA_HD int TwoBits(const uint8_t* qs, int e) {
  return (qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
}

// Element e (0..255) of a Q2_K block: sub-block e / 16 has the scale in the
// low nibble of its byte of scales and the min in the high one.
TESSERA_HD float DequantQ2K(const quant::BlockQ2_K* b, int e) {
  const int sc = b->scales[e >> 4];
  const float dl = MulRn(HalfBits(b->d), static_cast<float>(sc & 0xF));
  const float ml = MulRn(HalfBits(b->dmin), static_cast<float>(sc >> 4));
  return SubRn(MulRn(dl, static_cast<float>(TwoBits(b->qs, e))), ml);
}

// The 6-bit scale of sub-block s (0..15) of a Q3_K block, minus 32, as
// quant::Q3Scale unpacks it: low nibble s / 8 of scales[s % 8], top two
// bits 2(s / 4)..2(s / 4) + 1 of scales[8 + s % 4].
TESSERA_HD int Q3ScaleAt(const uint8_t* scales, int s) {
  const int low = (scales[s & 7] >> (4 * (s >> 3))) & 0xF;
  const int high = (scales[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
  return (low | (high << 4)) - 32;
}

// Element e (0..255) of a Q3_K block: the two low bits as Q2_K's, minus 4
// unless bit e / 32 of hmask[e % 32] is set.
TESSERA_HD float DequantQ3K(const quant::BlockQ3_K* b, int e) {
  const float dl = MulRn(HalfBits(b->d), static_cast<float>(Q3ScaleAt(b->scales, e >> 4)));
  const int high = (b->hmask[e & 31] >> (e >> 5)) & 1;
  return MulRn(dl, static_cast<float>(TwoBits(b->qs, e) - (high ? 0 : 4)));
}

// quant::kIq4Values packed one byte per value into two integers (values
// 0..7 and 8..15, the first in the low byte): device code cannot index a
// host array, but may read scalar constants.
constexpr uint64_t PackIq4Values(int first) {
  uint64_t packed = 0;
  for (int i = 0; i < 8; ++i) {
    packed |= uint64_t{static_cast<uint8_t>(quant::kIq4Values[first + i])} << (8 * i);
  }
  return packed;
}
inline constexpr uint64_t kIq4Low = PackIq4Values(0), kIq4High = PackIq4Values(8);

// kIq4Values[nibble] (nibble 0..15).
TESSERA_HD int Iq4Value(int nibble) {
  const uint64_t packed = nibble < 8 ? kIq4Low : kIq4High;
  return static_cast<int8_t>(static_cast<uint8_t>(packed >> (8 * (nibble & 7))));
}

// Element e (0..255) of an IQ4_XS block: sub-block s = e / 32 is laid out
// as an IQ4_NL block's values in qs[16s..16s + 15], with the 6-bit scale
// nibble s % 2 of scales_l[s / 2] and bits 2s..2s + 1 of scales_h on top.
TESSERA_HD float DequantIQ4XS(const quant::BlockIQ4_XS* b, int e) {
  const int s = e >> 5;
  const int low = (b->scales_l[s >> 1] >> (4 * (s & 1))) & 0xF;
  const int high = (b->scales_h >> (2 * s)) & 3;
  const float dl = MulRn(HalfBits(b->d), static_cast<float>((low | (high << 4)) - 32));
  return MulRn(dl, static_cast<float>(Iq4Value(Nibble32(b->qs + 16 * s, e & 31))));
}

// Element j of a block of type T (j < block_elems), the reference value.
template <quant::QuantType T>
TESSERA_HD float DequantElement(const uint8_t* block, int j) {
  using quant::QuantType;
  if constexpr (T == QuantType::kQ4_0) {
    const auto* b = reinterpret_cast<const quant::BlockQ4_0*>(block);
    return MulRn(static_cast<float>(Nibble32(b->qs, j) - 8), HalfBits(b->d));
  } else if constexpr (T == QuantType::kQ4_1) {
    const auto* b = reinterpret_cast<const quant::BlockQ4_1*>(block);
    return AddRn(MulRn(static_cast<float>(Nibble32(b->qs, j)), HalfBits(b->d)), HalfBits(b->m));
  } else if constexpr (T == QuantType::kQ5_0) {
    const auto* b = reinterpret_cast<const quant::BlockQ5_0*>(block);
    const int q = Nibble32(b->qs, j) | FifthBit(b->qh, j);
    return MulRn(static_cast<float>(q - 16), HalfBits(b->d));
  } else if constexpr (T == QuantType::kQ5_1) {
    const auto* b = reinterpret_cast<const quant::BlockQ5_1*>(block);
    const int q = Nibble32(b->qs, j) | FifthBit(b->qh, j);
    return AddRn(MulRn(static_cast<float>(q), HalfBits(b->d)), HalfBits(b->m));
  } else if constexpr (T == QuantType::kQ8_0) {
    const auto* b = reinterpret_cast<const quant::BlockQ8_0*>(block);
    return MulRn(static_cast<float>(b->qs[j]), HalfBits(b->d));
  } else if constexpr (T == QuantType::kQ4_K) {
    return DequantK45<false>(reinterpret_cast<const quant::BlockQ4_K*>(block), j);
  } else if constexpr (T == QuantType::kQ5_K) {
    return DequantK45<true>(reinterpret_cast<const quant::BlockQ5_K*>(block), j);
  } else if constexpr (T == QuantType::kQ6_K) {
    return DequantQ6K(reinterpret_cast<const quant::BlockQ6_K*>(block), j);
  } else if constexpr (T == QuantType::kQ2_K) {
    return DequantQ2K(reinterpret_cast<const quant::BlockQ2_K*>(block), j);
  } else if constexpr (T == QuantType::kQ3_K) {
    return DequantQ3K(reinterpret_cast<const quant::BlockQ3_K*>(block), j);
  } else if constexpr (T == QuantType::kIQ4_NL) {
    const auto* b = reinterpret_cast<const quant::BlockIQ4_NL*>(block);
    return MulRn(HalfBits(b->d), static_cast<float>(Iq4Value(Nibble32(b->qs, j))));
  } else {
    static_assert(T == QuantType::kIQ4_XS, "a quantized type without a formula");
    return DequantIQ4XS(reinterpret_cast<const quant::BlockIQ4_XS*>(block), j);
  }
}

// Elements and bytes per block of T (quant::Info's, usable on the device).
template <quant::QuantType T>
struct BlockGeometry {
  static constexpr bool kK = T == quant::QuantType::kQ4_K || T == quant::QuantType::kQ5_K ||
                             T == quant::QuantType::kQ6_K || T == quant::QuantType::kQ2_K ||
                             T == quant::QuantType::kQ3_K || T == quant::QuantType::kIQ4_XS;
  static constexpr int kElems = kK ? quant::kQKK : quant::kQK;
  static constexpr int kBytes = T == quant::QuantType::kQ4_0    ? 18
                                : T == quant::QuantType::kQ4_1  ? 20
                                : T == quant::QuantType::kQ5_0  ? 22
                                : T == quant::QuantType::kQ5_1  ? 24
                                : T == quant::QuantType::kQ8_0  ? 34
                                : T == quant::QuantType::kQ4_K  ? 144
                                : T == quant::QuantType::kQ5_K  ? 176
                                : T == quant::QuantType::kQ6_K  ? 210
                                : T == quant::QuantType::kQ2_K  ? 84
                                : T == quant::QuantType::kQ3_K  ? 110
                                : T == quant::QuantType::kIQ4_NL ? 18
                                                                : 136;  // IQ4_XS
};
// Each type's geometry against its block struct (blocks.h).
template <quant::QuantType T, typename Block, int kElems>
constexpr bool kGeometryIs =
    BlockGeometry<T>::kBytes == sizeof(Block) && BlockGeometry<T>::kElems == kElems;
static_assert(kGeometryIs<quant::QuantType::kQ4_0, quant::BlockQ4_0, quant::kQK>);
static_assert(kGeometryIs<quant::QuantType::kQ4_1, quant::BlockQ4_1, quant::kQK>);
static_assert(kGeometryIs<quant::QuantType::kQ5_0, quant::BlockQ5_0, quant::kQK>);
static_assert(kGeometryIs<quant::QuantType::kQ5_1, quant::BlockQ5_1, quant::kQK>);
static_assert(kGeometryIs<quant::QuantType::kQ8_0, quant::BlockQ8_0, quant::kQK>);
static_assert(kGeometryIs<quant::QuantType::kQ4_K, quant::BlockQ4_K, quant::kQKK>);
static_assert(kGeometryIs<quant::QuantType::kQ5_K, quant::BlockQ5_K, quant::kQKK>);
static_assert(kGeometryIs<quant::QuantType::kQ6_K, quant::BlockQ6_K, quant::kQKK>);
static_assert(kGeometryIs<quant::QuantType::kQ2_K, quant::BlockQ2_K, quant::kQKK>);
static_assert(kGeometryIs<quant::QuantType::kQ3_K, quant::BlockQ3_K, quant::kQKK>);
static_assert(kGeometryIs<quant::QuantType::kIQ4_NL, quant::BlockIQ4_NL, quant::kQK>);
static_assert(kGeometryIs<quant::QuantType::kIQ4_XS, quant::BlockIQ4_XS, quant::kQKK>);

// Element c of a row of blocks of type T.
template <quant::QuantType T>
TESSERA_HD float DequantAt(const uint8_t* row, int64_t c) {
  using G = BlockGeometry<T>;
  return DequantElement<T>(row + (c / G::kElems) * G::kBytes, static_cast<int>(c % G::kElems));
}

// Lane `lane` of the warp that owns one weight row: it takes elements
// lane, lane + 32, lane + 64, ... of the row (consecutive lanes read
// consecutive bytes of a block, and every block of the row is read by the
// warp once for all n activation rows), and adds w · x[i, c] into acc[i]
// for the n (≤ kQuantGemvMaxRows) rows of x [n, cols]. The warp then sums
// acc over its lanes.
template <quant::QuantType T>
TESSERA_HD void GemvLane(const uint8_t* row, int64_t cols, const float* x, int32_t n, int lane,
                         float* acc) {
  for (int64_t c = lane; c < cols; c += 32) {
    const float w = DequantAt<T>(row, c);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int32_t i = 0; i < kQuantGemvMaxRows; ++i) {
      if (i < n) acc[i] = fmaf(w, x[i * cols + c], acc[i]);
    }
  }
}

}  // namespace tessera::cuda
