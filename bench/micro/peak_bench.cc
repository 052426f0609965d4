// BM_PeakProducts/<kind>: the most multiply-adds one core does a second with
// the instruction the kernels are built on, in registers only (12
// independent accumulators, no loads), so that a kernel's rate can be read
// as a share of the core's ceiling:
//   0  vpdpbusd zmm   (AVX512-VNNI: 64 int8 multiply-adds; quantized products)
//   1  vdpbf16ps zmm  (AVX512-BF16: 32 bf16 multiply-adds; 16-bit weights)
//   2  vfmadd231ps zmm (AVX-512F: 16 f32 multiply-adds)
// One thread; a kind this CPU lacks is skipped. Items are multiply-adds.
#include <cstdint>

#include "benchmark/benchmark.h"
#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"

TESSERA_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,fma")
#include <immintrin.h>

namespace tessera::bench {
namespace {

constexpr int64_t kIterations = 1 << 20;  // of 12 products each

// Keeps v in a register the compiler cannot see through, so that the
// products are not hoisted or folded.
template <typename V>
inline void Opaque(V& v) {
  __asm__ volatile("" : "+v"(v));
}

// Runs 12 chains of `op` kIterations times; returns a value that depends on
// every chain. Each chain starts from its own opaque copy of `init`, so that
// the compiler cannot merge chains it would see are equal.
template <typename V, typename A, typename Op>
inline V TwelveChains(V init, A a, A b, Op op) {
  V c0 = init, c1 = init, c2 = init, c3 = init, c4 = init, c5 = init;
  V c6 = init, c7 = init, c8 = init, c9 = init, c10 = init, c11 = init;
  Opaque(c0), Opaque(c1), Opaque(c2), Opaque(c3), Opaque(c4), Opaque(c5);
  Opaque(c6), Opaque(c7), Opaque(c8), Opaque(c9), Opaque(c10), Opaque(c11);
  for (int64_t i = 0; i < kIterations; ++i) {
    c0 = op(c0, a, b), c1 = op(c1, a, b), c2 = op(c2, a, b), c3 = op(c3, a, b);
    c4 = op(c4, a, b), c5 = op(c5, a, b), c6 = op(c6, a, b), c7 = op(c7, a, b);
    c8 = op(c8, a, b), c9 = op(c9, a, b), c10 = op(c10, a, b), c11 = op(c11, a, b);
    Opaque(a);
  }
  Opaque(c0), Opaque(c1), Opaque(c2), Opaque(c3), Opaque(c4), Opaque(c5);
  Opaque(c6), Opaque(c7), Opaque(c8), Opaque(c9), Opaque(c10), Opaque(c11);
  return c0;
}

// Multiply-adds of one pass of `kind` (12 chains, kIterations steps); only
// on a CPU with the kind's instruction.
int64_t RunKind(int64_t kind) {
  constexpr int64_t kProducts = 12 * kIterations;
  if (kind == 0) {
    const __m512i v = TwelveChains(_mm512_setzero_si512(), _mm512_set1_epi8(3),
                                   _mm512_set1_epi8(5), [](__m512i c, __m512i a, __m512i b) {
                                     return _mm512_dpbusd_epi32(c, a, b);
                                   });
    benchmark::DoNotOptimize(v);
    return kProducts * 64;
  }
  if (kind == 1) {
    const __m512bh one = (__m512bh)_mm512_set1_epi16(0x3f80);
    const __m512 v = TwelveChains(_mm512_setzero_ps(), one, one,
                                  [](__m512 c, __m512bh a, __m512bh b) {
                                    return _mm512_dpbf16_ps(c, a, b);
                                  });
    benchmark::DoNotOptimize(v);
    return kProducts * 32;
  }
  const __m512 v = TwelveChains(_mm512_setzero_ps(), _mm512_set1_ps(1.0f), _mm512_set1_ps(0.5f),
                                [](__m512 c, __m512 a, __m512 b) {
                                  return _mm512_fmadd_ps(a, b, c);
                                });
  benchmark::DoNotOptimize(v);
  return kProducts * 16;
}

}  // namespace
}  // namespace tessera::bench

TESSERA_ISA_END

// Outside the region: the CPU check (and the registration's static
// initializer) must run on any x86-64.
namespace tessera::bench {
namespace {

void BM_PeakProducts(benchmark::State& state) {
  const int64_t kind = state.range(0);
  const bool has = kind == 0   ? cpu::CpuHasAvx512Vnni()
                   : kind == 1 ? cpu::CpuHasAvx512Bf16()
                               : cpu::CpuHasAvx512Kernels();
  if (!has) {
    state.SkipWithError("this CPU lacks the instruction");
    return;
  }
  int64_t products = 0;
  for (auto _ : state) products += RunKind(kind);
  state.SetLabel(kind == 0 ? "vpdpbusd" : kind == 1 ? "vdpbf16ps" : "vfmadd231ps");
  state.SetItemsProcessed(products);
}

BENCHMARK(BM_PeakProducts)->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.3);

}  // namespace
}  // namespace tessera::bench
