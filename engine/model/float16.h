// Conversions between float32 and the two 16-bit float formats stored in
// GGUF files, as raw uint16_t bit patterns:
//   half (IEEE 754 binary16): 1 sign, 5 exponent, 10 mantissa bits
//   bf16 (bfloat16):          1 sign, 8 exponent,  7 mantissa bits
// Narrowing rounds to nearest, ties to even; NaNs stay NaN (quieted), values
// beyond the half range become infinity, and half subnormals are produced
// and read exactly.
#pragma once

#include <bit>
#include <cstdint>

namespace tessera {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float32.
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  if (exp == 0x1f) {
    // Inf (mant == 0) or NaN; the payload moves to the top mantissa bits.
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  }
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    // NaN: keep the top payload bits and set the quiet bit so the result can
    // never collapse into infinity.
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  // 65520 = 0x477ff000 lies halfway between 65504 (largest half, odd
  // mantissa) and 65536, so it and everything above rounds to infinity.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    // Below 2^-14: the result is a half subnormal, round(|f| / 2^-24).
    const uint32_t exp = abs >> 23;
    // Below 2^-25 everything rounds to zero; exactly 2^-25 is a tie that
    // rounds to the even value zero, which the general path handles too.
    if (exp < 102) return sign;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    // q == 0x400 is the smallest normal half, which is the right encoding.
    return static_cast<uint16_t>(sign | q);
  }
  // Normal range: rebias 127 -> 15 and drop 13 mantissa bits. A carry out of
  // the mantissa correctly bumps the exponent.
  uint32_t h = (abs - 0x38000000u) >> 13;
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float Bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncate and force the quiet bit so no payload becomes infinity.
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  // Adding 0x7fff (+1 when the kept lsb is odd) rounds to nearest even;
  // overflow past the largest finite value correctly yields infinity.
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace tessera
