// Instruction-set regions for the kernel files.
//
// A kernel file (*_avx2.cc, *_avx512.cc, ...) is compiled for the baseline
// x86-64 like the rest of the library. It includes the standard library and
// every header without vector code first, then opens a region:
//   TESSERA_ISA_BEGIN("avx2,fma,f16c")
//   ... headers with vector code, the kernels ...
//   TESSERA_ISA_END
// Functions defined inside the region are compiled for those extensions.
// Library templates defined outside it (std::vector's growth, std::sort)
// keep the baseline even when the kernels instantiate them, so that the
// copy the linker keeps for the whole program never holds instructions
// that only some CPUs run (tests/scripts/isa_leak_check.sh checks it).
#pragma once

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
