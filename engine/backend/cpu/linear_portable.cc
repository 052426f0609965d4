#include "engine/backend/cpu/kernels.h"
#include "engine/model/float16.h"

namespace tessera::cpu {

float WeightAt(const Weight& w, int64_t i) {
  switch (w.dtype) {
    case DType::kF32:
      return static_cast<const float*>(w.data)[i];
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(w.data)[i]);
    case DType::kBF16:
      return Bf16ToFloat(static_cast<const uint16_t*>(w.data)[i]);
  }
  return 0.0f;
}

void LinearPortable(const float* x, int64_t n, const Weight& w, const float* bias, float* y,
                    int64_t col_begin, int64_t col_end) {
  const int64_t k = w.cols;
  for (int64_t j = col_begin; j < col_end; ++j) {
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * k;
      float acc = 0.0f;
      for (int64_t c = 0; c < k; ++c) acc += xi[c] * WeightAt(w, j * k + c);
      y[i * w.rows + j] = acc + (bias ? bias[j] : 0.0f);
    }
  }
}

LinearKernel SelectLinearKernel() {
  static const LinearKernel kernel = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma")) {
      return &LinearAvx512;
    }
    return &LinearPortable;
  }();
  return kernel;
}

const char* LinearKernelName() {
  return SelectLinearKernel() == &LinearAvx512 ? "avx512" : "portable";
}

}  // namespace tessera::cpu
