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
void UnpackK45(const Block& blk, const AffineRow& o) {
  // a = d·sc and b = -(dmin·m) = dmin·(-m): the reference's products.
  *o.A = blk.d, *o.B = blk.dmin;
  for (int group = 0; group < 4; ++group) {
    for (int half = 0; half < 2; ++half) {
      uint8_t sc, m;
      UnpackScaleMin(2 * group + half, blk.scales, &sc, &m);
      o.sa[2 * group + half] = static_cast<int8_t>(sc);
      o.sb[2 * group + half] = static_cast<int8_t>(-static_cast<int>(m));
      for (int l = 0; l < 32; ++l) {
        int v = half == 0 ? (blk.qs[32 * group + l] & 0x0F) : (blk.qs[32 * group + l] >> 4);
        if constexpr (kFifthBit) v += ((blk.qh[l] >> (2 * group + half)) & 1) << 4;
        o.q[64 * group + 32 * half + l] = static_cast<uint8_t>(v);
      }
    }
  }
}

// Values minus 32, so that b = -32·a folds into q: w = d·sc·(q - 32).
void UnpackQ6K(const BlockQ6_K& blk, const AffineRow& o) {
  *o.A = blk.d, *o.B = 0;
  for (int s = 0; s < kQKK / 16; ++s) o.sa[s] = blk.scales[s], o.sb[s] = 0;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = blk.ql + 64 * half;
    const uint8_t* qh = blk.qh + 32 * half;
    uint8_t* out = o.q + 128 * half;
    const auto v = [](int low, int high) { return static_cast<uint8_t>((low | (high << 4)) - 32); };
    for (int l = 0; l < 32; ++l) {
      out[l] = v(ql[l] & 0xF, (qh[l] >> 0) & 3);
      out[l + 32] = v(ql[l + 32] & 0xF, (qh[l] >> 2) & 3);
      out[l + 64] = v(ql[l] >> 4, (qh[l] >> 4) & 3);
      out[l + 96] = v(ql[l + 32] >> 4, (qh[l] >> 6) & 3);
    }
  }
}

// Q2_K: a = d·(sc & 15) and b = dmin·(-(sc >> 4)), as Q4_K's.
void UnpackQ2K(const BlockQ2_K& blk, const AffineRow& o) {
  *o.A = blk.d, *o.B = blk.dmin;
  for (int s = 0; s < kQKK / 16; ++s) {
    o.sa[s] = static_cast<int8_t>(blk.scales[s] & 0xF);
    o.sb[s] = static_cast<int8_t>(-(blk.scales[s] >> 4));
  }
  for (int e = 0; e < kQKK; ++e) o.q[e] = static_cast<uint8_t>(TwoBitsAt(blk.qs, e));
}

// Q3_K: q = the 3-bit value (0..7), a = d·sc and b = -4·a = (-d)·(4·sc),
// with sc in -32..31, so 4·sc fits an int8.
void UnpackQ3K(const BlockQ3_K& blk, const AffineRow& o) {
  *o.A = blk.d, *o.B = static_cast<uint16_t>(blk.d ^ 0x8000);
  for (int s = 0; s < kQKK / 16; ++s) {
    o.sa[s] = static_cast<int8_t>(Q3Scale(blk.scales, s));
    o.sb[s] = static_cast<int8_t>(4 * o.sa[s]);
  }
  for (int e = 0; e < kQKK; ++e) {
    const int high = (blk.hmask[e % 32] >> (e / 32)) & 1;
    o.q[e] = static_cast<uint8_t>(TwoBitsAt(blk.qs, e) + 4 * high);
  }
}

// The 32 indices of 16 bytes of IQ4 nibbles: low nibbles first.
void UnpackNibbles(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = static_cast<uint8_t>(qs[j] & 0xF);
    q[j + kQK / 2] = static_cast<uint8_t>(qs[j] >> 4);
  }
}

// IQ4_XS: a = d·(ls - 32), no offset.
void UnpackIq4Xs(const BlockIQ4_XS& blk, const AffineRow& o) {
  *o.A = blk.d, *o.B = 0;
  for (int s = 0; s < kQKK / kQK; ++s) {
    o.sa[s] = static_cast<int8_t>(Iq4XsScale(blk, s)), o.sb[s] = 0;
    UnpackNibbles(blk.qs + 16 * s, o.q + kQK * s);
  }
}

template <typename Block>
const Block* Blocks(const void* p) {
  return static_cast<const Block*>(p);
}

// One block of a _0/_1 type, Q8_0 or IQ4_NL: A = d, sa = 1, and B·sb is the
// reference's offset (m for the _1 types, 0 for the others, whose q is
// signed or, for Q4_0, taken less its zero).
template <typename Block>
void UnpackSimple(const Block& blk, const AffineForm& form, const AffineRow& o) {
  *o.sa = 1, *o.sb = form.sb_const;
  *o.A = blk.d;
  if constexpr (requires { blk.m; }) {
    *o.B = blk.m;
  } else {
    *o.B = 0;
  }
}

}  // namespace

AffineForm AffineFormOf(QuantType type) {
  AffineForm f;
  switch (type) {
    case QuantType::kQ4_0: f.has_b = false, f.zero = 8; break;
    case QuantType::kQ5_0: f.has_b = false, f.zero = 16; break;
    case QuantType::kQ4_1:
    case QuantType::kQ5_1: f.sb_const = 1; break;
    case QuantType::kQ8_0: f.signed_q = true, f.has_b = false; break;
    case QuantType::kQ4_K:
    case QuantType::kQ5_K: f.groups_per_super = 8, f.per_group_ints = true; break;
    case QuantType::kQ6_K:
      f.group = 16, f.groups_per_super = 16, f.per_group_ints = true;
      f.signed_q = true, f.has_b = false;
      break;
    case QuantType::kQ2_K:
    case QuantType::kQ3_K: f.group = 16, f.groups_per_super = 16, f.per_group_ints = true; break;
    case QuantType::kIQ4_NL: f.signed_q = true, f.has_b = false, f.values = kIq4Values; break;
    case QuantType::kIQ4_XS:
      f.groups_per_super = 8, f.per_group_ints = true;
      f.signed_q = true, f.has_b = false, f.values = kIq4Values;
      break;
  }
  return f;
}

void UnpackAffine(QuantType type, const void* blocks, int64_t n, const AffineRow& out) {
  const AffineForm form = AffineFormOf(type);
  const int64_t elems = Info(type).block_elems, groups = elems / form.group, nb = n / elems;
  for (int64_t i = 0; i < nb; ++i) {
    // Block i's part of the row: its values, group ints and (one) A and B.
    const AffineRow o{out.q + elems * i, out.sa + groups * i, out.sb + groups * i, out.A + i,
                      out.B + i};
    switch (type) {
      case QuantType::kQ4_0:
        Unpack32(Blocks<BlockQ4_0>(blocks)[i].qs, nullptr, o.q);
        UnpackSimple(Blocks<BlockQ4_0>(blocks)[i], form, o);
        break;
      case QuantType::kQ4_1:
        Unpack32(Blocks<BlockQ4_1>(blocks)[i].qs, nullptr, o.q);
        UnpackSimple(Blocks<BlockQ4_1>(blocks)[i], form, o);
        break;
      case QuantType::kQ5_0:
        Unpack32(Blocks<BlockQ5_0>(blocks)[i].qs, Blocks<BlockQ5_0>(blocks)[i].qh, o.q);
        UnpackSimple(Blocks<BlockQ5_0>(blocks)[i], form, o);
        break;
      case QuantType::kQ5_1:
        Unpack32(Blocks<BlockQ5_1>(blocks)[i].qs, Blocks<BlockQ5_1>(blocks)[i].qh, o.q);
        UnpackSimple(Blocks<BlockQ5_1>(blocks)[i], form, o);
        break;
      case QuantType::kQ8_0:
        std::memcpy(o.q, Blocks<BlockQ8_0>(blocks)[i].qs, 32);
        UnpackSimple(Blocks<BlockQ8_0>(blocks)[i], form, o);
        break;
      case QuantType::kQ4_K: UnpackK45<BlockQ4_K, false>(Blocks<BlockQ4_K>(blocks)[i], o); break;
      case QuantType::kQ5_K: UnpackK45<BlockQ5_K, true>(Blocks<BlockQ5_K>(blocks)[i], o); break;
      case QuantType::kQ6_K: UnpackQ6K(Blocks<BlockQ6_K>(blocks)[i], o); break;
      case QuantType::kQ2_K: UnpackQ2K(Blocks<BlockQ2_K>(blocks)[i], o); break;
      case QuantType::kQ3_K: UnpackQ3K(Blocks<BlockQ3_K>(blocks)[i], o); break;
      case QuantType::kIQ4_NL:
        UnpackNibbles(Blocks<BlockIQ4_NL>(blocks)[i].qs, o.q);
        UnpackSimple(Blocks<BlockIQ4_NL>(blocks)[i], form, o);
        break;
      case QuantType::kIQ4_XS: UnpackIq4Xs(Blocks<BlockIQ4_XS>(blocks)[i], o); break;
    }
  }
}

}  // namespace tessera::quant
