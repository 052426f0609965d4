// The machine's read bandwidth, the ceiling of every memory-bound step:
//   BM_MemoryRead/<MiB>   streams a buffer of MiB mebibytes with the shared
//                         backend's thread pool, summing it as integers so
//                         that loads, not adds, bound it
// A decode step of the 110M model reads ~219 MB of weights (plus its KV
// cache), so 256 MiB and 1024 MiB show what a step can expect from DRAM, and
// 16 MiB what fits in cache.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/micro/bench_common.h"

namespace tessera::bench {
namespace {

// Sum of n 64-bit words. Integer addition is associative, so the compiler
// may vectorize it and keep many loads in flight; floats would form one
// serial chain of adds and measure add latency instead of memory. An
// AVX-512 clone (64-byte loads) is chosen at run time where the CPU has it.
__attribute__((target_clones("avx512f", "default"))) uint64_t SumWords(const uint64_t* p,
                                                                        int64_t n) {
  uint64_t total = 0;
  for (int64_t i = 0; i < n; ++i) total += p[i];
  return total;
}

void BM_MemoryRead(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int64_t words = bytes / static_cast<int64_t>(sizeof(uint64_t));
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  std::memset(buffer.get(), 1, bytes);  // touch every page before timing
  ThreadPool& pool = SharedBackend().pool();
  const int64_t chunk = int64_t{1} << 17;  // 1 MiB of words per claim
  const int64_t chunks = (words + chunk - 1) / chunk;
  std::vector<uint64_t> partial(chunks);  // one slot per claimed range's first chunk
  for (auto _ : state) {
    uint64_t total = 0;
    std::fill(partial.begin(), partial.end(), 0);
    pool.ParallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
      const int64_t first = begin * chunk, last = std::min(words, end * chunk);
      partial[begin] = SumWords(buffer.get() + first, last - first);
    });
    for (uint64_t p : partial) total += p;
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

BENCHMARK(BM_MemoryRead)->Arg(16)->Arg(256)->Arg(1024)->UseRealTime()->MinTime(0.3)->Unit(
    benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::bench
