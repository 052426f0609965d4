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

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

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

}  // namespace tessera::quant
