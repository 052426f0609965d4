// BM_Linear/<dtype>/<n>/<out>/<in>: y[n, out] = x[n, in] · Wᵀ on the CPU
// backend with a panel-packed weight, at the 110M llama model's shapes.
// BM_LinearBf16/<dtype>/...: the same with bf16 products (AVX512-BF16 or
// AMX-BF16, as the kernel level chooses; on CPUs with either only).
// TESSERA_CPU_KERNEL picks the level (kernels.h), so one machine compares them. Quantized types (q8_0, q4_K, q6_K) run the integer kernels;
// their bytes/s count the file's bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/micro/bench_common.h"

namespace tessera::bench {
namespace {

void BM_Linear(benchmark::State& state, DType dtype, bool amx) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  const int64_t out = state.range(1), in = state.range(2);
  cpu::CpuBackend& backend = amx ? SharedAmxBackend() : SharedBackend();
  const Weight& w = LinearWeight(dtype, out, in, amx);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(n * in), 7);
  std::vector<float> y(static_cast<size_t>(n * out));
  for (auto _ : state) {
    backend.Linear(x.data(), n, w, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * n * out * in * iters / 1e9, benchmark::Counter::kIsRate);
  // Bytes of weights streamed (the file's dtype, without panel padding).
  state.SetBytesProcessed(state.iterations() * out * static_cast<int64_t>(DTypeRowBytes(dtype, in)));
  state.SetItemsProcessed(state.iterations() * n);  // token rows
}

struct Shape {
  int64_t out, in;
};

// QKV/O, gate/up, down and the tied LM head of the 110M model.
constexpr Shape kShapes[] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}};
// 14 rows: two full tiles of 6 and a remainder (split 4 + 4).
constexpr int64_t kRows[] = {1, 4, 14, 16, 64, 512};

void RegisterDtype(DType dtype, bool all_shapes, bool amx = false) {
  const std::string name =
      std::string(amx ? "BM_LinearBf16/" : "BM_Linear/") + std::string(DTypeName(dtype));
  for (const Shape& s : kShapes) {
    if (!all_shapes && (s.out != 768 || s.in != 768)) continue;
    for (int64_t n : kRows) {
      benchmark::RegisterBenchmark(name.c_str(), BM_Linear, dtype, amx)
          ->Args({n, s.out, s.in})
          ->UseRealTime()  // the work runs on the pool's threads
          ->MinTime(0.1)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

[[maybe_unused]] const bool kRegistered = [] {
  RegisterDtype(DType::kF16, /*all_shapes=*/true);
  RegisterDtype(DType::kBF16, /*all_shapes=*/false);
  RegisterDtype(DType::kF32, /*all_shapes=*/false);
  for (DType q : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) RegisterDtype(q, /*all_shapes=*/true);
  if (cpu::SelectBf16LinearKernel()) RegisterDtype(DType::kF16, /*all_shapes=*/true, /*amx=*/true);
  return true;
}();

}  // namespace
}  // namespace tessera::bench
