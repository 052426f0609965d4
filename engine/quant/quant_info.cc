#include <array>
#include <cctype>

#include "engine/quant/blocks.h"
#include "engine/quant/quant.h"

namespace tessera::quant {
namespace {

constexpr std::array<QuantInfo, kNumQuantTypes> kInfos = {{
    {"q4_0", 2, kQK, sizeof(BlockQ4_0)},
    {"q4_1", 3, kQK, sizeof(BlockQ4_1)},
    {"q5_0", 6, kQK, sizeof(BlockQ5_0)},
    {"q5_1", 7, kQK, sizeof(BlockQ5_1)},
    {"q8_0", 8, kQK, sizeof(BlockQ8_0)},
    {"q4_K", 12, kQKK, sizeof(BlockQ4_K)},
    {"q5_K", 13, kQKK, sizeof(BlockQ5_K)},
    {"q6_K", 14, kQKK, sizeof(BlockQ6_K)},
    {"q2_K", 10, kQKK, sizeof(BlockQ2_K)},
    {"q3_K", 11, kQKK, sizeof(BlockQ3_K)},
    {"iq4_nl", 20, kQK, sizeof(BlockIQ4_NL)},
    {"iq4_xs", 23, kQKK, sizeof(BlockIQ4_XS)},
}};

// ggml's type numbers, for naming types in messages.
constexpr std::array<std::string_view, 40> kGgmlNames = {
    "f32",     "f16",    "q4_0",    "q4_1",  "type 4", "type 5",  "q5_0",   "q5_1",
    "q8_0",    "q8_1",   "q2_K",    "q3_K",  "q4_K",   "q5_K",    "q6_K",   "q8_K",
    "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s",   "iq2_s",  "iq4_xs",
    "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m",   "bf16",   "type 31",
    "type 32", "type 33", "tq1_0",  "tq2_0", "type 36", "type 37", "type 38", "mxfp4",
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

const QuantInfo& Info(QuantType type) { return kInfos[static_cast<size_t>(type)]; }

std::optional<QuantType> QuantTypeFromGgml(uint32_t ggml_id) {
  for (int i = 0; i < kNumQuantTypes; ++i) {
    if (kInfos[i].ggml_id == ggml_id) return static_cast<QuantType>(i);
  }
  return std::nullopt;
}

std::optional<QuantType> QuantTypeFromName(std::string_view name) {
  for (int i = 0; i < kNumQuantTypes; ++i) {
    if (EqualsIgnoreCase(kInfos[i].name, name)) return static_cast<QuantType>(i);
  }
  return std::nullopt;
}

std::string_view GgmlTypeNameOf(uint32_t ggml_id) {
  if (ggml_id < kGgmlNames.size()) return kGgmlNames[ggml_id];
  return "unknown type";
}

}  // namespace tessera::quant
