// Quantized tensor types of GGUF files, numbered and laid out as ggml lays
// them out (see blocks.h). A row of n elements is n / block_elems blocks of
// block_bytes each; n must be a multiple of block_elems.
//
// DequantizeRow reproduces the reference formulas exactly (bit for bit the
// floats ggml's dequantize_row_* gives); QuantizeRow reproduces ggml's
// reference quantizers (quantize_row_*_ref, no importance matrix) for the
// types CanQuantize accepts.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::quant {

enum class QuantType : uint8_t {
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ4_K, kQ5_K, kQ6_K,
  kQ2_K, kQ3_K, kIQ4_NL, kIQ4_XS,  // read, not written (CanQuantize)
};
inline constexpr int kNumQuantTypes = 12;

struct QuantInfo {
  std::string_view name;  // as llama.cpp names it: "q4_0", "q4_K", ...
  uint32_t ggml_id;       // ggml_type number in GGUF tensor infos
  int32_t block_elems;    // 32, or 256 for the K types
  int32_t block_bytes;
};

const QuantInfo& Info(QuantType type);
// The quantized type with this ggml type number; nullopt for any other
// number (float types, and quantized types Tessera does not read).
std::optional<QuantType> QuantTypeFromGgml(uint32_t ggml_id);
// "q4_k", "Q4_K", "q8_0"...: case-insensitive.
std::optional<QuantType> QuantTypeFromName(std::string_view name);
// Name of any ggml type number, quantized or not ("f16", "iq2_xxs", ...),
// for messages; "type <id>" when unknown.
std::string_view GgmlTypeNameOf(uint32_t ggml_id);

// Bytes of a row of n elements (n a multiple of block_elems).
inline int64_t RowBytes(QuantType type, int64_t n) {
  const QuantInfo& info = Info(type);
  return n / info.block_elems * info.block_bytes;
}

// out[0, n) = the values of blocks; n a multiple of block_elems.
void DequantizeRow(QuantType type, const void* blocks, float* out, int64_t n);
// Whether QuantizeRow writes `type`: the first eight types; Tessera reads
// Q2_K, Q3_K, IQ4_NL and IQ4_XS but does not write them.
bool CanQuantize(QuantType type);
// blocks = quantized in[0, n); n a multiple of block_elems; `type` one that
// CanQuantize accepts (others leave blocks zero).
void QuantizeRow(QuantType type, const float* in, void* blocks, int64_t n);

}  // namespace tessera::quant

namespace tessera::quant {

// A row's blocks as integers and factored per-group affine maps, for
// integer dot products: element c of group g = c / group is
//   a[g] · q[c] + b[g],  a[g] = float(A[s]) · sa[g],  b[g] = float(B[s]) · sb[g],
// with s = g / groups_per_super, A and B f16 bits and sa, sb small integers
// (and q read as values[q] or q - zero where the form says so).
// The products are exact in float and equal the scale and offset of the
// reference formulas (so a·q + b equals DequantizeRow up to the rounding of
// the products). q is unsigned (0..15 or 0..31) for the Q4/Q5 types; Q4_0
// and Q5_0 take it less a zero of 8 and 16, with b = 0; Q8_0's is the int8
// of its blocks and Q6_K's its 6-bit value minus 32, signed with b = 0.
// Q2_K's q is its 2-bit value (b = -dmin·m, as Q4_K's); Q3_K's is its 3-bit
// value (0..7) with b = -4·a, as B = -d times sb = 4·sa. The IQ4 types store
// their 4-bit index as q: the value is values[q] (kIq4Values), signed, b = 0.
struct AffineForm {
  int32_t group = 32;            // elements per (sa, sb): 16 for Q2_K, Q3_K, Q6_K
  int32_t groups_per_super = 1;  // groups per (A, B): 256 / group for K types
  bool signed_q = false;         // Q8_0, Q6_K, IQ4_NL, IQ4_XS
  bool has_b = true;             // offsets: Q4_1, Q5_1, Q4_K, Q5_K, Q2_K, Q3_K
  bool per_group_ints = false;   // K types; others have sa = 1 and sb = sb_const
  int8_t sb_const = 0;           // 1 (Q4_1, Q5_1)
  const int8_t* values = nullptr;  // IQ4 types: the 16 values q indexes
  int8_t zero = 0;                 // Q4_0, Q5_0: the value is q - zero
};
AffineForm AffineFormOf(QuantType type);

// Outputs of UnpackAffine for a row of n elements (n a multiple of the block).
struct AffineRow {
  uint8_t* q;   // [n] (int8 bits where signed_q)
  int8_t* sa;   // [n / group]
  int8_t* sb;   // [n / group]
  uint16_t* A;  // [n / group / groups_per_super]
  uint16_t* B;  // [n / group / groups_per_super]
};
void UnpackAffine(QuantType type, const void* blocks, int64_t n, const AffineRow& out);

}  // namespace tessera::quant
