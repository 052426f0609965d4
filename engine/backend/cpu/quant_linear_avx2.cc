// The AVX2 quantized kernel (vpmaddubsw + vpmaddwd), built for AVX2,
// FMA and F16C and chosen at run time.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/quant_linear.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX2)

#include "engine/backend/cpu/quant_linear_avx2.h"

namespace tessera::cpu {

void QuantLinearAvx2(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                     int64_t tile_begin, int64_t tile_end) {
  QuantLinear256(x, w, bias, y, tile_begin, tile_end);
}

}  // namespace tessera::cpu

TESSERA_ISA_END
