// The AVX512-VNNI kernel (quant_linear_avx512vnni.inc) built with GFNI as
// well, for the 4-bit types' high nibbles; chosen where UseGfniKernel().
#define TESSERA_VNNI_ISA TESSERA_ISA_AVX512VNNI_GFNI
#define TESSERA_VNNI_GFNI 1
#define TESSERA_VNNI_ENTRY QuantLinearAvx512VnniGfni
#include "engine/backend/cpu/quant_linear_avx512vnni.inc"
