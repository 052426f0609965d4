// Instruction-set regions for the kernel files.
//
// A kernel file (*_avx2.cc, *_avx512.cc, ...) is compiled for the baseline
// x86-64 like the rest of the library. It includes the standard library and
// every header without vector code first, then opens a region:
//   TESSERA_ISA_BEGIN(TESSERA_ISA_AVX2)
//   ... headers with vector code, the kernels ...
//   TESSERA_ISA_END
// Functions defined inside the region are compiled for those extensions.
// Library templates defined outside it (std::vector's growth, std::sort)
// keep the baseline even when the kernels instantiate them, so that the
// copy the linker keeps for the whole program never holds instructions
// that only some CPUs run (tests/scripts/isa_leak_check.sh checks it).
#pragma once

// The instruction sets of each family of kernel files (kernels.h levels);
// CpuHasAvx2Kernels() and its siblings (cpu_features.cc) check the same.
#define TESSERA_ISA_AVX2 "avx2,fma,f16c"                              // *_avx2.cc
#define TESSERA_ISA_AVXVNNI "avx2,fma,f16c,avxvnni"                   // *_avxvnni.cc
#define TESSERA_ISA_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c,avx2"
#define TESSERA_ISA_AVX512VNNI "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2"
#define TESSERA_ISA_AVX512VNNI_GFNI TESSERA_ISA_AVX512VNNI ",gfni"  // *_gfni_avx512vnni.cc
#define TESSERA_ISA_AMX "amx-tile,amx-bf16,amx-int8,avx512f,avx512bw,avx512vl,avx512bf16,fma"

#define TESSERA_ISA_PRAGMA(x) _Pragma(#x)

#if defined(__clang__)
#define TESSERA_ISA_BEGIN(isa) \
  TESSERA_ISA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define TESSERA_ISA_END TESSERA_ISA_PRAGMA(clang attribute pop)
#else
// -Wpsabi: GCC notes that the implicit helpers of lambdas taking vector
// arguments (their function-pointer conversions, never used) would pass them
// differently outside the region. -Wuninitialized: GCC's AVX-512 intrinsic
// headers make their "undefined" vectors from themselves (__Y = __Y), and
// GCC warns where they are inlined, after the region ends; so these two stay
// off for the rest of the file.
#define TESSERA_ISA_BEGIN(isa)                                                            \
  TESSERA_ISA_PRAGMA(GCC diagnostic ignored "-Wuninitialized")                            \
  TESSERA_ISA_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized")                      \
  TESSERA_ISA_PRAGMA(GCC push_options) TESSERA_ISA_PRAGMA(GCC target(isa))                \
  TESSERA_ISA_PRAGMA(GCC diagnostic push) TESSERA_ISA_PRAGMA(GCC diagnostic ignored "-Wpsabi")
#define TESSERA_ISA_END TESSERA_ISA_PRAGMA(GCC diagnostic pop) TESSERA_ISA_PRAGMA(GCC pop_options)
#endif
