// Elementwise ops of one llama layer on the CPU backend at n = 16 rows:
// RmsNorm over dim 768, SwiGlu over ffn 2048, Rope over 12 heads of 64.
#include <numeric>
#include <vector>

#include "bench/micro/bench_common.h"

namespace tessera::bench {
namespace {

constexpr int32_t kRows = 16, kDim = 768, kFfn = 2048, kHeads = 12, kHeadDim = 64;

void BM_RmsNorm(benchmark::State& state) {
  cpu::CpuBackend& backend = SharedBackend();
  const Weight w = VectorWeight(kDim, 21);
  const std::vector<float> x = RandomFloats(size_t{kRows} * kDim, 22);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    backend.RmsNorm(x.data(), w, 1e-5f, kRows, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetBytesProcessed(state.iterations() * 2 * int64_t{kRows} * kDim * 4);  // read x, write out
}

void BM_SwiGlu(benchmark::State& state) {
  cpu::CpuBackend& backend = SharedBackend();
  const int64_t count = int64_t{kRows} * kFfn;
  const std::vector<float> gate = RandomFloats(size_t(count), 23, 4.0f);
  const std::vector<float> up = RandomFloats(size_t(count), 24);
  std::vector<float> out(static_cast<size_t>(count));
  for (auto _ : state) {
    backend.SwiGlu(gate.data(), up.data(), count, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * count);
  state.SetBytesProcessed(state.iterations() * 3 * count * 4);  // read gate, up; write out
}

void BM_Rope(benchmark::State& state) {
  cpu::CpuBackend& backend = SharedBackend();
  // Rotations keep the norm, so rotating the same buffer again and again
  // stays finite.
  std::vector<float> q = RandomFloats(size_t{kRows} * kHeads * kHeadDim, 25);
  std::vector<int32_t> positions(kRows);
  std::iota(positions.begin(), positions.end(), 100);
  for (auto _ : state) {
    backend.Rope(q.data(), kRows, kHeads, kHeadDim, kHeadDim, 10000.0f, positions.data());
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetBytesProcessed(state.iterations() * 2 * int64_t{kRows} * kHeads * kHeadDim * 4);
}

BENCHMARK(BM_RmsNorm)->UseRealTime()->MinTime(0.1);
BENCHMARK(BM_SwiGlu)->UseRealTime()->MinTime(0.1);
BENCHMARK(BM_Rope)->UseRealTime()->MinTime(0.1);

}  // namespace
}  // namespace tessera::bench
