// The AVX-VNNI quantized kernel (one VEX vpdpbusd per 4 inputs of 8 rows),
// built for AVX2, FMA, F16C and AVX-VNNI and chosen at run time.
#define TESSERA_AVXVNNI 1
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVXVNNI)

#include "engine/backend/cpu/quant_linear_avx2.h"

namespace tessera::cpu {

void QuantLinearAvxVnni(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                        int64_t tile_begin, int64_t tile_end) {
  QuantLinear256(x, w, bias, y, tile_begin, tile_end);
}

}  // namespace tessera::cpu

TESSERA_ISA_END
