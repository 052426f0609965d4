// BM_ModelProducts/<dtype>/<rows>/<shared>: every matrix product of one
// decode step of the 110M llama model (12 layers of QKV, O, gate/up and
// down, then the tied 32000-row head), in the order and with the calls the
// model makes (LinearMany for QKV and gate/up), on every thread of the
// shared backend. shared 0: each layer has weights of its own; the 220 MB of
// f16 weights (117 MB of Q8_0) do not fit in a cache, so bytes/s is the rate
// at which a step's products read their weights, to compare with
// BM_MemoryRead. shared 1: every layer uses layer 0's weights, which stay in
// cache, so the difference is what reading from memory costs the products,
// and the rest (against BM_QuantKernel's one-thread rate) is the cost of
// ~50 parallel jobs a step: their starts and ends, the activations each
// converts, and unequal cores. dtype: 0 f16 (bf16 products where the CPU has
// them, else f32), 1 Q8_0, 2 Q4_K (the bytes of the file's type).
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/micro/bench_common.h"

namespace tessera::bench {
namespace {

constexpr int kLayers = 12;
constexpr int64_t kDim = 768, kFfn = 2048, kVocab = 32000;

struct LayerSet {
  std::array<Weight, 7> w;  // q, k, v, o, gate, up, down
};

struct ModelProducts {
  std::vector<LayerSet> layers;
  Weight head;
  int64_t bytes = 0;  // the file's bytes of every weight
};

cpu::CpuBackend& BackendFor(DType dtype) {
  const bool bf16 = dtype == DType::kF16 && cpu::SelectBf16LinearKernel() != nullptr;
  return bf16 ? SharedAmxBackend() : SharedBackend();
}

Weight Prepared(cpu::CpuBackend& backend, DType dtype, int64_t rows, int64_t cols,
                const std::vector<uint8_t>& host, int64_t& bytes) {
  auto w = backend.PrepareWeight(host.data(), dtype, rows, cols, WeightUse::kLinear);
  if (!w.ok()) std::abort();
  bytes += rows * static_cast<int64_t>(DTypeRowBytes(dtype, cols));
  return *w;
}

// Random bytes per shape, packed anew for every layer (distinct memory).
const ModelProducts& ModelFor(DType dtype) {
  static std::map<DType, ModelProducts> cache;
  if (auto it = cache.find(dtype); it != cache.end()) return it->second;
  cpu::CpuBackend& backend = BackendFor(dtype);
  const auto square = RandomWeightBytes(dtype, size_t(kDim * kDim), 1);
  const auto up = RandomWeightBytes(dtype, size_t(kFfn * kDim), 2);
  const auto head = RandomWeightBytes(dtype, size_t(kVocab * kDim), 3);
  ModelProducts m;
  for (int l = 0; l < kLayers; ++l) {
    LayerSet s;
    for (int i = 0; i < 4; ++i) s.w[i] = Prepared(backend, dtype, kDim, kDim, square, m.bytes);
    s.w[4] = Prepared(backend, dtype, kFfn, kDim, up, m.bytes);
    s.w[5] = Prepared(backend, dtype, kFfn, kDim, up, m.bytes);
    s.w[6] = Prepared(backend, dtype, kDim, kFfn, up, m.bytes);
    m.layers.push_back(s);
  }
  m.head = Prepared(backend, dtype, kVocab, kDim, head, m.bytes);
  return cache.emplace(dtype, std::move(m)).first->second;
}

void BM_ModelProducts(benchmark::State& state) {
  const DType dtype = std::array{DType::kF16, DType::kQ8_0, DType::kQ4_K}[state.range(0)];
  const int32_t n = static_cast<int32_t>(state.range(1));
  const bool shared = state.range(2) != 0;
  cpu::CpuBackend& backend = BackendFor(dtype);
  const ModelProducts& m = ModelFor(dtype);
  const std::vector<float> x = RandomFloats(size_t(n) * kFfn, 7);
  std::vector<float> q(size_t(n) * kDim), k(q.size()), v(q.size()), o(q.size());
  std::vector<float> g(size_t(n) * kFfn), u(g.size()), logits(size_t(n) * kVocab);
  for (auto _ : state) {
    for (const LayerSet& own : m.layers) {
      const LayerSet& s = shared ? m.layers[0] : own;
      const LinearOutput qkv[] = {{&s.w[0], nullptr, q.data()},
                                  {&s.w[1], nullptr, k.data()},
                                  {&s.w[2], nullptr, v.data()}};
      backend.LinearMany(x.data(), n, qkv);
      backend.Linear(x.data(), n, s.w[3], nullptr, o.data());
      const LinearOutput gate_up[] = {{&s.w[4], nullptr, g.data()}, {&s.w[5], nullptr, u.data()}};
      backend.LinearMany(x.data(), n, gate_up);
      backend.Linear(x.data(), n, s.w[6], nullptr, o.data());
    }
    backend.Linear(x.data(), n, m.head, nullptr, logits.data());
    benchmark::DoNotOptimize(logits.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * m.bytes);
  state.SetLabel(std::string(DTypeName(dtype)));
}

BENCHMARK(BM_ModelProducts)
    ->ArgsProduct({{0, 1, 2}, {1, 16}, {0, 1}})
    ->UseRealTime()  // the work runs on the pool's threads
    ->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::bench
