// Shared pieces of the microbenchmarks: the thread count, one CPU backend per
// process, random inputs, and linear weights prepared the way the model
// loader prepares them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/float16.h"
#include "engine/quant/quant.h"

namespace tessera::bench {

inline int& BenchThreadsFlag() {
  static int threads = 0;
  return threads;
}

inline void SetBenchThreads(int n) { BenchThreadsFlag() = n; }

// --threads=N, else TESSERA_BENCH_THREADS, else one per core.
inline int BenchThreads() {
  if (BenchThreadsFlag() > 0) return BenchThreadsFlag();
  if (const char* env = std::getenv("TESSERA_BENCH_THREADS"); env && std::atoi(env) > 0) {
    return std::atoi(env);
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// One backend (and thread pool) for every kernel benchmark; created on first
// use, after main has read the thread count.
inline cpu::CpuBackend& SharedBackend() {
  static cpu::CpuBackend* backend = new cpu::CpuBackend(BenchThreads());
  return *backend;
}

// The same with bf16 matrix products (AVX512-BF16 or AMX; only where
// cpu::SelectBf16LinearKernel() is not null).
inline cpu::CpuBackend& SharedAmxBackend() {
  static cpu::CpuBackend* backend = new cpu::CpuBackend(BenchThreads(), /*use_bf16=*/true);
  return *backend;
}

// Uniform floats in [-scale, scale), the same for the same seed.
inline std::vector<float> RandomFloats(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// `count` random elements of `dtype` as raw bytes (GGUF layout).
inline std::vector<uint8_t> RandomWeightBytes(DType dtype, size_t count, uint32_t seed) {
  const std::vector<float> f = RandomFloats(count, seed, 0.05f);
  if (IsQuantized(dtype)) {  // one row of blocks: count is a multiple of 256 here
    std::vector<uint8_t> bytes(DTypeRowBytes(dtype, static_cast<int64_t>(count)));
    quant::QuantizeRow(QuantTypeOf(dtype), f.data(), bytes.data(), static_cast<int64_t>(count));
    return bytes;
  }
  std::vector<uint8_t> bytes(count * DTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &f[i], 4);
      continue;
    }
    const uint16_t h = dtype == DType::kF16 ? FloatToHalf(f[i]) : FloatToBf16(f[i]);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  return bytes;
}

// A random [rows, cols] linear weight prepared by the shared backend
// (PrepareWeight with kLinear, i.e. panel-packed), cached per shape so every
// batch size of a shape reuses it.
inline const Weight& LinearWeight(DType dtype, int64_t rows, int64_t cols, bool amx = false) {
  static std::map<std::tuple<DType, int64_t, int64_t, bool>, Weight> cache;
  const auto key = std::make_tuple(dtype, rows, cols, amx);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const std::vector<uint8_t> host =
      RandomWeightBytes(dtype, static_cast<size_t>(rows * cols), static_cast<uint32_t>(rows + cols));
  cpu::CpuBackend& backend = amx ? SharedAmxBackend() : SharedBackend();
  auto w = backend.PrepareWeight(host.data(), dtype, rows, cols, WeightUse::kLinear);
  if (!w.ok()) std::abort();
  return cache.emplace(key, *w).first->second;
}

// A [1, cols] f32 vector weight (norm gains), used in place like the loader's
// kTable weights; the storage lives for the process.
inline Weight VectorWeight(int64_t cols, uint32_t seed) {
  auto* data = new std::vector<float>(RandomFloats(static_cast<size_t>(cols), seed));
  return Weight{data->data(), DType::kF32, 1, cols, WeightLayout::kRowMajor};
}

}  // namespace tessera::bench
