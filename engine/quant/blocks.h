// Block layouts of ggml's quantized types (the GGUF specification's). Every
// half is an IEEE binary16 bit pattern, little-endian like every field.
#pragma once

#include <cstdint>

namespace tessera::quant {

inline constexpr int kQK = 32;    // elements per block of the _0/_1 types
inline constexpr int kQKK = 256;  // elements per super-block of the K types
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K/Q5_K

// x[j] = d · (q[j] − 8), q the low nibbles of qs for j < 16, the high for j ≥ 16.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x[j] = d · q[j] + m.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[kQK / 2];
};
// x[j] = d · (q[j] − 16): a nibble of qs plus bit j of qh (a little-endian uint32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[j] = d · q[j] + m.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[j] = d · qs[j].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// Eight sub-blocks of 32: x = d · sc[s] · q − dmin · m[s], with 6-bit sc and
// m packed in scales (see UnpackScaleMin), q the nibbles of qs.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
// As Q4_K, with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
// Sixteen sub-blocks of 16: x = d · scales[s] · (q − 32), q 6 bits (4 in ql,
// 2 in qh).
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};

// Sixteen sub-blocks of 16: x = d · (sc[s] & 15) · q − dmin · (sc[s] >> 4),
// q 2 bits. Byte l of a 32-byte run of qs holds element l + 32k of the run's
// 128 in bits 2k..2k+1 (runs for elements 0..127 and 128..255).
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d, dmin;
};
// Sixteen sub-blocks of 16: x = d · (sc[s] − 32) · (q − 4), sc 6 bits
// packed in scales (see Q3Scale), q 2 bits laid out as Q2_K's plus a
// third: bit j of hmask[l] is set where element l + 32j's value has 4 added.
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;
};
// The 16 values of the non-linear 4-bit types (IQ4_NL, IQ4_XS).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};
// x[j] = d · kIq4Values[q[j]], q the low nibbles of qs for j < 16, the high
// for j ≥ 16.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// Eight sub-blocks of 32, each laid out as an IQ4_NL block's values: x = d ·
// (ls − 32) · kIq4Values[q], ls 6 bits: the nibble s % 2 of scales_l[s / 2]
// and bits 2s..2s+1 of scales_h as its top two.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);

// Scale and min of sub-block j (0..7) of a Q4_K/Q5_K block: the first four
// are the low 6 bits of bytes 0..3 and 4..7; the last four take 4 bits from
// bytes 8..11 and their top 2 bits from the top of bytes 0..7.
inline void UnpackScaleMin(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Bits 2j..2j+1 of qs[32h + l]: the two low bits of element e = 128h + 32j
// + l (j 0..3, l 0..31) of a Q2_K or Q3_K block.
inline int TwoBitsAt(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// The 16 scales of a Q3_K block, 6 bits each, minus 32: the low four bits
// of scale s are nibble s / 8 of scales[s % 8], the top two bits 2(s / 4)..
// 2(s / 4) + 1 of scales[8 + s % 4].
inline int Q3Scale(const uint8_t* scales, int s) {
  const int low = (scales[s % 8] >> (4 * (s / 8))) & 0xF;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// The 6-bit scale of sub-block s of an IQ4_XS block, minus 32.
inline int Iq4XsScale(const BlockIQ4_XS& b, int s) {
  const int low = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
  const int high = (b.scales_h >> (2 * s)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace tessera::quant
