// Quantized tensor types of GGUF files, numbered and laid out as ggml lays
// them out (see blocks.h). A row of n elements is n / block_elems blocks of
// block_bytes each; n must be a multiple of block_elems.
//
// DequantizeRow reproduces the reference formulas exactly (bit for bit the
// floats ggml's dequantize_row_* gives); QuantizeRow reproduces ggml's
// reference quantizers (quantize_row_*_ref, no importance matrix).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::quant {

enum class QuantType : uint8_t { kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ4_K, kQ5_K, kQ6_K };
inline constexpr int kNumQuantTypes = 8;

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
// blocks = quantized in[0, n); n a multiple of block_elems.
void QuantizeRow(QuantType type, const float* in, void* blocks, int64_t n);

}  // namespace tessera::quant

namespace tessera::quant {

// A row's blocks as integers and per-group affine maps, for integer dot
// products: element c is a[c / group] · q[c] + b[c / group], where q is
// unsigned (0..15, 0..31 or 0..63) for every type but Q8_0, whose q is the
// signed int8 of its blocks (b = 0). This equals DequantizeRow up to the
// rounding of the products (the offsets are folded into b).
struct AffineRow {
  int32_t group = 32;  // elements per (a, b) pair: 16 for Q6_K, else 32
  bool signed_q = false;
};
AffineRow AffineFormOf(QuantType type);
// q[0, n), a and b [n / group]; n a multiple of the block.
void UnpackAffine(QuantType type, const void* blocks, int64_t n, uint8_t* q, float* a, float* b);

}  // namespace tessera::quant
