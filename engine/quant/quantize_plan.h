// Which type each tensor of a model gets when quantized to one of
// llama.cpp's file types, following the choices of llama.cpp's
// llama-quantize without an importance matrix: 1-D tensors, norms and
// position embeddings stay as they are; output.weight (or a tied
// token_embd.weight) gets Q6_K (Q8_0 when its rows are not whole blocks);
// Q4_K_M and Q5_K_M give Q6_K to attn_v (or a fused attn_qkv) and ffn_down of the layers
// use_more_bits picks (the first and last eighth and every third in
// between), Q4_K_S gives Q5_K to the first four attn_v and the first eighth
// of ffn_down; rows that are not whole blocks fall back (Q4_K → Q5_0,
// Q5_K → Q5_1, Q6_K → Q8_0, then F16).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::quant {

// The llama.cpp file types Tessera writes; values are general.file_type's.
enum class QuantMix : uint32_t {
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
};

// "Q4_K_M", "q8_0", ... (case-insensitive); nullopt for any other name.
std::optional<QuantMix> QuantMixFromName(std::string_view name);
std::string_view QuantMixName(QuantMix mix);
// ggml type number of the mix's main type (q4_0, q8_0, q4_K, q5_K, ...).
uint32_t QuantMixBaseType(QuantMix mix);

inline constexpr uint32_t kGgmlF32 = 0;
inline constexpr uint32_t kGgmlF16 = 1;
inline constexpr uint32_t kGgmlBF16 = 30;

struct PlanTensor {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the row length
  uint32_t ggml_type = kGgmlF32;
};

struct PlannedType {
  uint32_t ggml_type = kGgmlF32;  // the type to write
  bool fallback = false;          // rows are not whole blocks of the preferred type
};

// One entry per tensor, in the order given. n_layer is the model's
// <arch>.block_count. Counters that llama.cpp keeps in its own tensor order
// (non-block tensors, then blk.0.*, blk.1.*, ... by name) are kept in that
// order here too, whatever the order of `tensors`.
std::vector<PlannedType> PlanQuantization(QuantMix mix, const std::vector<PlanTensor>& tensors,
                                          int n_layer);

}  // namespace tessera::quant
