// One quantized kernel on one thread: y = x · wᵀ for the 110M model's FFN
// up projection (2048 outputs × 768 inputs), per kernel level and batch
// size, so that the levels compare on the same machine in the same run.
//   tessera-microbench --benchmark_filter=QuantKernel
// Arguments: level (kernels.h order: 0 portable … 6 amx; 7: the AMX tiles
// for every type and batch), type (0 Q4_K, 1 Q8_0, 2 Q6_K, 3 Q5_K, 4 Q4_0,
// 5 Q3_K, 6 IQ4_XS, 7 Q2_K), rows of x. A level this CPU lacks is skipped.
// TESSERA_BENCH_QUANT_SHAPE=OUTxIN (e.g. 768x2048, the FFN down
// projection) takes another shape.
//   BM_QuantLinearMemory/<type>/<rows>  256 MB of weights of the 1.1B
// model's FFN shape through the shared backend (every thread), so that they
// come from memory: bytes/s is the weight read rate (rows 1: decode's
// bound), items/s the multiply-adds (rows 16: a 16-stream decode step's
// products, to compare with BM_QuantKernel's in-cache rate).
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/micro/bench_common.h"
#include "engine/backend/cpu/kernels.h"
#include "engine/backend/cpu/quant_linear.h"
#include "engine/quant/blocks.h"
#include "engine/util/thread_pool.h"

namespace tessera::bench {
namespace {

constexpr int64_t kOut = 2048, kIn = 768;

// The weight's outputs and inputs: kOut × kIn, or TESSERA_BENCH_QUANT_SHAPE
// (inputs a multiple of 256).
std::pair<int64_t, int64_t> Shape() {
  const char* given = std::getenv("TESSERA_BENCH_QUANT_SHAPE");
  long long out = 0, in = 0;
  if (given && std::sscanf(given, "%lldx%lld", &out, &in) == 2 && out > 0 && in > 0 &&
      in % 256 == 0) {
    return {out, in};
  }
  return {kOut, kIn};
}

quant::QuantType TypeArg(int64_t i) {
  switch (i) {
    case 1: return quant::QuantType::kQ8_0;
    case 2: return quant::QuantType::kQ6_K;
    case 3: return quant::QuantType::kQ5_K;
    case 4: return quant::QuantType::kQ4_0;
    case 5: return quant::QuantType::kQ3_K;
    case 6: return quant::QuantType::kIQ4_XS;
    case 7: return quant::QuantType::kQ2_K;
    default: return quant::QuantType::kQ4_K;
  }
}

// Blocks of `type` for `out` rows of `in` floats w: quantized where Tessera
// writes the type; otherwise random blocks (every integer field valid) with
// the f16 scales set to 2^-10, as a file's are in size.
std::vector<uint8_t> WeightBlocks(quant::QuantType type, const std::vector<float>& w,
                                  int64_t out, int64_t in) {
  const int64_t row_bytes = quant::RowBytes(type, in);
  std::vector<uint8_t> blocks(static_cast<size_t>(out * row_bytes));
  if (quant::CanQuantize(type)) {
    for (int64_t r = 0; r < out; ++r) {
      quant::QuantizeRow(type, w.data() + r * in, blocks.data() + r * row_bytes, in);
    }
    return blocks;
  }
  uint32_t state = 12345;
  for (auto& b : blocks) b = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
  const quant::QuantInfo& info = quant::Info(type);
  const uint16_t scale = 0x1400;  // 2^-10
  for (size_t b = 0; b < blocks.size(); b += static_cast<size_t>(info.block_bytes)) {
    uint8_t* block = blocks.data() + b;
    switch (type) {
      case quant::QuantType::kQ2_K:
        std::memcpy(block + offsetof(quant::BlockQ2_K, d), &scale, 2);
        std::memcpy(block + offsetof(quant::BlockQ2_K, dmin), &scale, 2);
        break;
      case quant::QuantType::kQ3_K:
        std::memcpy(block + offsetof(quant::BlockQ3_K, d), &scale, 2);
        break;
      default:  // IQ4_NL, IQ4_XS: d first
        std::memcpy(block, &scale, 2);
    }
  }
  return blocks;
}

void BM_QuantKernel(benchmark::State& state) {
  const bool tiles = state.range(0) == 7;
  const auto level = tiles ? cpu::CpuKernelLevel::kAmx
                           : static_cast<cpu::CpuKernelLevel>(state.range(0));
  const quant::QuantType type = TypeArg(state.range(1));
  const int64_t n = state.range(2);
  if (!cpu::CpuSupportsLevel(level) || (tiles && !cpu::AmxInt8Available())) {
    state.SkipWithError("this CPU lacks the level");
    return;
  }
  if (tiles && state.range(1) >= 4) {
    state.SkipWithError("the AMX tiles take Q4_K, Q8_0, Q6_K and Q5_K");
    return;
  }
  const auto [out, in] = Shape();
  const std::vector<float> w = RandomFloats(static_cast<size_t>(out * in), 31, 0.05f);
  const std::vector<uint8_t> blocks = WeightBlocks(type, w, out, in);
  const DType dtype = DTypeOf(type);
  std::vector<uint8_t> packed(cpu::QuantPackedBytes(dtype, out, in));
  const Weight weight{packed.data(), dtype, out, in, WeightLayout::kQuantTiles};
  ThreadPool pool(1);
  cpu::PackQuantWeight(blocks.data(), weight, pool);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(n * in), 32);
  cpu::QuantizedRows q;
  cpu::PrepareQuantizedRows(n, in, cpu::ActivationBlockOf(dtype), q);
  cpu::QuantizeActivations(x.data(), 0, n, q);
  std::vector<float> y(static_cast<size_t>(n * out));
  const cpu::QuantLinearKernel kernel =
      tiles ? &cpu::QuantLinearAmxTiles : cpu::QuantLinearKernelOf(level);
  for (auto _ : state) {
    kernel(q, weight, nullptr, y.data(), 0, cpu::NumQuantTiles(out));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(tiles ? "amx-tiles" : cpu::KernelLevelName(level)) + " " +
                 std::string(quant::Info(type).name));
  state.SetItemsProcessed(state.iterations() * n * out * in);  // multiply-adds
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t level : {1, 2, 4, 7}) {
    for (int64_t type : {0, 1, 2, 3, 4, 5, 6, 7}) {
      for (int64_t n : {1, 4, 8, 12, 16, 32, 64, 128, 256}) b->Args({level, type, n});
    }
  }
}

BENCHMARK(BM_QuantKernel)->Apply(Args)->UseRealTime()->MinTime(0.2);

// Copies of one random weight of the FFN shape, kMemoryBytes of file bytes in
// all, prepared once per type by the shared backend (which keeps them).
constexpr int64_t kMemRows = 5632, kMemCols = 2048, kMemoryBytes = int64_t{256} << 20;

int64_t MemoryFileBytes(DType dtype) { return DTypeRowBytes(dtype, kMemCols) * kMemRows; }

const std::vector<Weight>& MemoryWeights(DType dtype) {
  static std::map<DType, std::vector<Weight>> cache;
  if (auto it = cache.find(dtype); it != cache.end()) return it->second;
  const int64_t file_bytes = MemoryFileBytes(dtype);
  const std::vector<uint8_t> host = RandomWeightBytes(dtype, size_t{kMemRows} * kMemCols, 41);
  std::vector<Weight>& weights = cache[dtype];
  for (int64_t b = 0; b < kMemoryBytes; b += file_bytes) {
    auto w = SharedBackend().PrepareWeight(host.data(), dtype, kMemRows, kMemCols,
                                           WeightUse::kLinear);
    if (!w.ok()) std::abort();
    weights.push_back(*w);
  }
  return weights;
}

void BM_QuantLinearMemory(benchmark::State& state) {
  const quant::QuantType type = TypeArg(state.range(0));
  const DType dtype = DTypeOf(type);
  const std::vector<Weight>& weights = MemoryWeights(dtype);
  cpu::CpuBackend& backend = SharedBackend();
  const int32_t rows = static_cast<int32_t>(state.range(1));
  const std::vector<float> x = RandomFloats(static_cast<size_t>(rows) * kMemCols, 7);
  std::vector<float> y(static_cast<size_t>(rows) * kMemRows);
  for (auto _ : state) {
    for (const Weight& w : weights) backend.Linear(x.data(), rows, w, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(quant::Info(type).name));
  const int64_t calls = state.iterations() * static_cast<int64_t>(weights.size());
  state.SetBytesProcessed(calls * MemoryFileBytes(dtype));
  state.SetItemsProcessed(calls * rows * kMemRows * kMemCols);  // multiply-adds
}

BENCHMARK(BM_QuantLinearMemory)
    ->ArgsProduct({{0, 1, 2}, {1, 16}})
    ->UseRealTime()
    ->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::bench
