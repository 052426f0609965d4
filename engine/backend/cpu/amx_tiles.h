// The AMX tile configuration shared by the AMX kernels (built for
// AMX-TILE).
#pragma once

#include <cstdint>

namespace tessera::cpu {

// Palette 1: for each tile register, its rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// LDTILECFG with the whole 64 bytes as the operand. GCC 12's
// _tile_loadconfig names only the first 8 bytes as read, so the stores of
// rows and colsb can be dropped as dead, leaving the tiles unconfigured.
inline void LoadTileConfig(const TileConfig& cfg) {
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

// The tile products of the split-scale kernels of the K types
// (quant_linear_k_amx.cc, quant_linear_q6k_amx.cc): A is up to kBlockRows
// activation rows of kTileInputs bytes (RowTilesOf's tiles), B kTileQuads
// rows of 16 outputs × 4 inputs, C kBlockRows × 16 int32.
namespace amx_int8 {
constexpr int kBlockRows = 16;     // activation rows per tile product
constexpr int kTileInputs = 64;    // inputs per tile product
constexpr int kTileQuads = kTileInputs / 4;
constexpr int kBRowBytes = 64;     // 16 outputs × 4 inputs
constexpr int kSuperInputs = 256;  // inputs of a K-type superblock
}  // namespace amx_int8

}  // namespace tessera::cpu
