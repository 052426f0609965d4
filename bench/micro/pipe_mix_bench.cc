// BM_PipeMix: whether FMAs can run beside the AVX2 quantized kernel's
// integer products for free. The loop is the inner loop of the 4-bit kernel
// (quant_linear_avx2.h: nibble unpacking, vpmaddubsw for 4 activation rows,
// int16 sums widened by vpmaddwd once per 32 inputs) over an L1-resident
// 8 × 2048 tile. Mode 0 runs it alone; the other modes add a fifth row's
// products as f32 FMAs over weights already widened to f32:
//   1: the fifth row's activations broadcast from memory (vbroadcastss);
//   2: its activations held in registers (no loads: FMAs only).
// Each iteration times mode 0 and the chosen mode back to back, so that the
// host's drift cancels in the ratio; `ratio` is the mixed loop's
// multiply-adds a second over mode 0's (above 1: the FMAs came for free in
// part). One thread; skipped on CPUs without AVX2 and FMA.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/backend/cpu/isa_target.h"
#include "engine/backend/cpu/kernels.h"

TESSERA_ISA_BEGIN(TESSERA_ISA_AVX2)
#include <immintrin.h>

namespace tessera::bench {
namespace {

constexpr int kInputs = 2048;
constexpr int kQuads = kInputs / 4;

struct PipeMixData {
  alignas(64) uint8_t nibbles[kInputs * 8 / 2];  // 32 bytes: 2 quads × 8 outputs
  alignas(64) int8_t xq[4][kInputs];             // the 4 integer rows
  alignas(64) float xf[kInputs];                 // the FMA row
  alignas(64) float wide[kQuads][4][8];          // weights widened to f32
};

inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// One pass over the tile; returns a value that depends on every sum.
template <int kMode>
__attribute__((noinline)) float PipeMixPass(const PipeMixData& d) {
  __m256i dot[4];
  __m256 f[4];
  for (int r = 0; r < 4; ++r) dot[r] = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) f[i] = _mm256_setzero_ps();
  __m256 xr[4];
  for (int i = 0; i < 4; ++i) xr[i] = _mm256_set1_ps(d.xf[i]);
  const __m256i low = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi16(1);
  for (int g = 0; g < kQuads; g += 8) {  // 32 inputs
    __m256i part[4];
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) {
      const int q = g + u;
      const __m256i packed = _mm256_load_si256(reinterpret_cast<const __m256i*>(d.nibbles) + q / 2);
      const __m256i w = _mm256_and_si256(q % 2 ? _mm256_srli_epi16(packed, 4) : packed, low);
      for (int r = 0; r < 4; ++r) {
        const __m256i pairs = _mm256_maddubs_epi16(w, Broadcast4(&d.xq[r][4 * q]));
        part[r] = u == 0 ? pairs : _mm256_add_epi16(part[r], pairs);
      }
      if constexpr (kMode != 0) {
        for (int i = 0; i < 4; ++i) {
          const __m256 x = kMode == 1 ? _mm256_broadcast_ss(&d.xf[4 * q + i]) : xr[i];
          f[i] = _mm256_fmadd_ps(_mm256_load_ps(d.wide[q][i]), x, f[i]);
        }
      }
    }
    for (int r = 0; r < 4; ++r) dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(part[r], one));
  }
  const __m256i s =
      _mm256_add_epi32(_mm256_add_epi32(dot[0], dot[1]), _mm256_add_epi32(dot[2], dot[3]));
  const __m256 fs = _mm256_add_ps(_mm256_add_ps(f[0], f[1]), _mm256_add_ps(f[2], f[3]));
  return float(_mm256_extract_epi32(s, 0)) + _mm_cvtss_f32(_mm256_castps256_ps128(fs));
}

template <int kMode>
double TimePasses(const PipeMixData& d, int passes, float* sink) {
  const auto start = std::chrono::steady_clock::now();
  for (int p = 0; p < passes; ++p) {
    benchmark::ClobberMemory();  // the pass is pure: keep GCC from hoisting it
    *sink += PipeMixPass<kMode>(d);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BM_PipeMix(benchmark::State& state) {
  if (!cpu::CpuHasAvx2Kernels()) {
    state.SkipWithError("needs AVX2 and FMA");
    return;
  }
  auto d = std::make_unique<PipeMixData>();
  std::mt19937 rng(7);
  for (auto& b : d->nibbles) b = uint8_t(rng());
  for (auto& row : d->xq) for (auto& v : row) v = int8_t(int(rng() % 255) - 127);
  for (auto& v : d->xf) v = float(int(rng() % 255) - 127);
  for (auto& quad : d->wide) for (auto& in : quad) for (auto& v : in) v = float(rng() % 16);
  const int mode = int(state.range(0));
  constexpr int kPasses = 200;
  double alone = 0, mixed = 0;
  float sink = 0;
  for (auto _ : state) {
    alone += TimePasses<0>(*d, kPasses, &sink);
    mixed += mode == 1 ? TimePasses<1>(*d, kPasses, &sink) : TimePasses<2>(*d, kPasses, &sink);
  }
  benchmark::DoNotOptimize(sink);
  const double macs = double(state.iterations()) * kPasses * kInputs * 8;
  state.counters["int_GMACs"] = 4 * macs / alone / 1e9;
  state.counters["mixed_GMACs"] = 5 * macs / mixed / 1e9;
  state.counters["ratio"] = (5 * macs / mixed) / (4 * macs / alone);
}

BENCHMARK(BM_PipeMix)->Arg(1)->Arg(2)->MinTime(0.5);

}  // namespace
}  // namespace tessera::bench

TESSERA_ISA_END
