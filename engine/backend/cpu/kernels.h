// CPU kernels shared by the CPU backend. Each works on a range of output
// columns or rows so the backend can split it across threads; every output
// element is computed by one thread in a fixed order, whatever the split.
#pragma once

#include <cstdint>

#include "engine/backend/backend.h"

namespace tessera::cpu {

// y[i, j] = dot(x[i, :], w[j, :]) (+ bias[j]) for i in [0, n), j in
// [col_begin, col_end). x: [n, w.cols] f32; y: [n, w.rows] f32.
using LinearKernel = void (*)(const float* x, int64_t n, const Weight& w, const float* bias,
                              float* y, int64_t col_begin, int64_t col_end);

void LinearPortable(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                    int64_t col_begin, int64_t col_end);
void LinearAvx512(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                  int64_t col_begin, int64_t col_end);

// The fastest kernel this CPU supports (checked once, at run time).
LinearKernel SelectLinearKernel();
const char* LinearKernelName();

// Reads element i of a weight as f32.
float WeightAt(const Weight& w, int64_t i);

}  // namespace tessera::cpu
