// The AVX512-VNNI kernel (quant_linear_avx512vnni.inc), built for AVX-512
// F/BW/VL/DQ and AVX512-VNNI.
#define TESSERA_VNNI_ISA TESSERA_ISA_AVX512VNNI
#define TESSERA_VNNI_GFNI 0
#define TESSERA_VNNI_ENTRY QuantLinearAvx512Vnni
#include "engine/backend/cpu/quant_linear_avx512vnni.inc"
