// The AVX2 quantized kernel (vpmaddubsw + vpmaddwd), compiled with -mavx2
// -mfma -mf16c and chosen at run time.
#include "engine/backend/cpu/quant_linear_avx2.h"

namespace tessera::cpu {

void QuantLinearAvx2(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                     int64_t tile_begin, int64_t tile_end) {
  QuantLinear256(x, w, bias, y, tile_begin, tile_end);
}

}  // namespace tessera::cpu
