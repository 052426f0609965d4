// Per-thread scratch memory for the CPU kernels.
//
// Compiled without instruction-set flags, so that the standard library code
// it instantiates (vector growth) is portable: a kernel function
// (compiled for AVX2 or AVX-512) that grew its own std::vector would emit a copy of that
// code with wide instructions, which the linker may pick for every caller.
#pragma once

#include <cstddef>

namespace tessera::cpu {

// A buffer of at least `count` floats, owned by the calling thread and valid
// until that thread's next call. Grows, never shrinks.
float* ThreadScratchF32(size_t count);

}  // namespace tessera::cpu
