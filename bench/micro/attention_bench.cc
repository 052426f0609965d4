// Attention over the CPU backend's paged KV cache with the 110M model's
// shapes (12 heads, 12 KV heads, head_dim 64, blocks of 16 tokens):
//   BM_DecodeAttention/<seqs>/<context>/<f16>  one new row per sequence
//                                         (192/192/1: a 16-stream step of
//                                         12 layers, more than the L3)
//   BM_DecodeAttentionSharedPrefix/<seqs>/<context>  the same, every
//                                         sequence's blocks but its last shared
//                                         (a cached system prompt)
//   BM_PrefillAttention/<seqs>/<len>      padded prefill, every prompt `len`
//   BM_PrefillAttentionRagged/<seqs>/<len> prompts len, len/2, len/4, len/8, ...
//   BM_PrefillAttentionSharedPrefix/<seqs>/<len>/<f16>  `len` new rows per
//                                         sequence after a shared 1,024-token
//                                         cached prefix (a system prompt hit in
//                                         the cache); KV in f16 when <f16> is 1
// The cache is filled with KvAppend (random K and V) before timing; only
// Attention is timed.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "bench/micro/bench_common.h"

namespace tessera::bench {
namespace {

constexpr int32_t kHeads = 12, kKvHeads = 12, kHeadDim = 64, kBlock = 16;
constexpr int64_t kRowFloats = int64_t{kHeads} * kHeadDim;  // q row = kv row here

AttentionShape Shape() {
  return AttentionShape{kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(float{kHeadDim})};
}

// Block tables of sequences holding `kv_lens` tokens, with the blocks of all
// sequences shuffled so that no table is contiguous (as after churn).
std::vector<std::vector<int32_t>> MakeBlockTables(const std::vector<int32_t>& kv_lens) {
  std::vector<std::vector<int32_t>> tables;
  int32_t total = 0;
  for (int32_t len : kv_lens) total += (len + kBlock - 1) / kBlock;
  std::vector<int32_t> ids(total);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
  auto next = ids.begin();
  for (int32_t len : kv_lens) {
    const int32_t blocks = (len + kBlock - 1) / kBlock;
    tables.emplace_back(next, next + blocks);
    next += blocks;
  }
  return tables;
}

// Per-sequence slices for q_lens new tokens ending at kv_lens, packed one
// sequence after another; slot_mapping covers the new tokens only.
AttentionMetadata MakeMeta(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& kv_lens,
                           const std::vector<std::vector<int32_t>>& tables) {
  AttentionMetadata meta;
  meta.block_size = kBlock;
  for (size_t s = 0; s < q_lens.size(); ++s) {
    meta.seqs.push_back({meta.num_tokens, q_lens[s], kv_lens[s], tables[s].data()});
    for (int32_t p = kv_lens[s] - q_lens[s]; p < kv_lens[s]; ++p) {
      meta.slot_mapping.push_back(tables[s][p / kBlock] * kBlock + p % kBlock);
    }
    meta.num_tokens += q_lens[s];
    meta.max_q_len = std::max(meta.max_q_len, q_lens[s]);
    meta.max_kv_len = std::max(meta.max_kv_len, kv_lens[s]);
  }
  return meta;
}

// Allocates a one-layer cache for `tables` and writes random K and V for
// every token of every sequence.
void FillCache(cpu::CpuBackend& backend, const std::vector<int32_t>& kv_lens,
               const std::vector<std::vector<int32_t>>& tables, DType dtype = DType::kF32) {
  int32_t blocks = 0;
  for (const auto& t : tables) blocks += static_cast<int32_t>(t.size());
  KvStorageShape shape{1, blocks, kBlock, kKvHeads, kHeadDim, dtype};
  if (!backend.AllocateKvCache(shape).ok()) std::abort();
  const AttentionMetadata all = MakeMeta(kv_lens, kv_lens, tables);
  const std::vector<float> k = RandomFloats(size_t(all.num_tokens) * kRowFloats, 11);
  const std::vector<float> v = RandomFloats(size_t(all.num_tokens) * kRowFloats, 12);
  backend.KvAppend(0, k.data(), v.data(), all);
}

// Times Attention for `meta`; `scored` is the number of (query, key) pairs
// the mask leaves visible, per head.
void RunAttention(benchmark::State& state, const AttentionMetadata& meta, int64_t scored) {
  cpu::CpuBackend& backend = SharedBackend();
  const std::vector<float> q = RandomFloats(size_t(meta.num_tokens) * kRowFloats, 13);
  std::vector<float> out(q.size());
  const AttentionShape shape = Shape();
  for (auto _ : state) {
    backend.Attention(0, q.data(), shape, meta, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  // q·k and p·v: 2 multiply-adds per dimension per visible pair.
  state.counters["GFLOPS"] = benchmark::Counter(
      4.0 * scored * kHeads * kHeadDim * iters / 1e9, benchmark::Counter::kIsRate);
  state.SetItemsProcessed(state.iterations() * meta.num_tokens);  // query rows
}

void BM_DecodeAttention(benchmark::State& state) {
  const int32_t seqs = static_cast<int32_t>(state.range(0));
  const int32_t context = static_cast<int32_t>(state.range(1));
  // Cache type: 0 f32, 1 f16, 2 int8 (with an f32 scale per token and KV head).
  const DType dtype = std::array{DType::kF32, DType::kF16, DType::kI8}.at(state.range(2));
  const std::vector<int32_t> kv_lens(seqs, context), q_lens(seqs, 1);
  const auto tables = MakeBlockTables(kv_lens);
  FillCache(SharedBackend(), kv_lens, tables, dtype);
  RunAttention(state, MakeMeta(q_lens, kv_lens, tables), int64_t{seqs} * context);
  // K and V of every cached token are read once per step.
  const KvStorageShape token{1, 0, 1, kKvHeads, kHeadDim, dtype};
  state.SetBytesProcessed(state.iterations() * seqs * context *
                          static_cast<int64_t>(token.BytesPerBlock()));
}

// Tables of `seqs` sequences of `context` tokens whose blocks are all one
// shared run but the last block of each (shuffled ids).
std::vector<std::vector<int32_t>> SharedPrefixTables(int32_t seqs, int32_t context) {
  const int32_t shared = (context - 1) / kBlock;
  std::vector<int32_t> ids(shared + seqs);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
  std::vector<std::vector<int32_t>> tables;
  for (int32_t s = 0; s < seqs; ++s) {
    tables.emplace_back(ids.begin(), ids.begin() + shared);
    tables.back().push_back(ids[shared + s]);
  }
  return tables;
}

void BM_DecodeAttentionSharedPrefix(benchmark::State& state) {
  const int32_t seqs = static_cast<int32_t>(state.range(0));
  const int32_t context = static_cast<int32_t>(state.range(1));
  const std::vector<int32_t> kv_lens(seqs, context), q_lens(seqs, 1);
  const auto tables = SharedPrefixTables(seqs, context);
  FillCache(SharedBackend(), kv_lens, tables);
  RunAttention(state, MakeMeta(q_lens, kv_lens, tables), int64_t{seqs} * context);
}

// Prompt lengths len, len/2, len/4, len/8 (at least 1), repeated.
std::vector<int32_t> PromptLengths(int32_t seqs, int32_t len, bool ragged) {
  std::vector<int32_t> lens(seqs, len);
  if (ragged) {
    for (int32_t s = 0; s < seqs; ++s) lens[s] = std::max(1, len >> (s % 4));
  }
  return lens;
}

void PrefillAttention(benchmark::State& state, bool ragged) {
  const std::vector<int32_t> lens = PromptLengths(
      static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)), ragged);
  const auto tables = MakeBlockTables(lens);
  FillCache(SharedBackend(), lens, tables);
  const AttentionMetadata meta = MakeMeta(lens, lens, tables);
  int64_t scored = 0;
  for (int32_t len : lens) scored += int64_t{len} * (len + 1) / 2;  // causal
  RunAttention(state, meta, scored);
  // Share of the padded [B, T_max] query grid that is padding.
  state.counters["pad"] =
      1.0 - double(meta.num_tokens) / (double(lens.size()) * meta.max_q_len);
}

void BM_PrefillAttention(benchmark::State& state) { PrefillAttention(state, false); }

void BM_PrefillAttentionSharedPrefix(benchmark::State& state) {
  constexpr int32_t kPrefix = 1024;
  const int32_t seqs = static_cast<int32_t>(state.range(0));
  const int32_t len = static_cast<int32_t>(state.range(1));
  const std::vector<int32_t> kv_lens(seqs, kPrefix + len), q_lens(seqs, len);
  // The prefix's blocks are shared; each sequence's own rows have their own.
  std::vector<int32_t> ids(kPrefix / kBlock + seqs * ((len + kBlock - 1) / kBlock));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
  std::vector<std::vector<int32_t>> tables;
  auto next = ids.begin() + kPrefix / kBlock;
  for (int32_t s = 0; s < seqs; ++s) {
    tables.emplace_back(ids.begin(), ids.begin() + kPrefix / kBlock);
    const int32_t own = (len + kBlock - 1) / kBlock;
    tables.back().insert(tables.back().end(), next, next + own);
    next += own;
  }
  FillCache(SharedBackend(), kv_lens, tables, state.range(2) ? DType::kF16 : DType::kF32);
  const int64_t scored = int64_t{seqs} * (int64_t{kPrefix} * len + int64_t{len} * (len + 1) / 2);
  RunAttention(state, MakeMeta(q_lens, kv_lens, tables), scored);
}
void BM_PrefillAttentionRagged(benchmark::State& state) { PrefillAttention(state, true); }

BENCHMARK(BM_DecodeAttention)
    ->ArgsProduct({{1, 16}, {128, 1024}, {0, 1, 2}})
    ->Args({192, 192, 1})
    ->Args({192, 192, 2})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeAttentionSharedPrefix)
    ->Args({16, 1024})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillAttention)
    ->Args({1, 512})
    ->Args({4, 128})
    ->Args({16, 32})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillAttentionSharedPrefix)
    ->Args({16, 32, 0})
    ->Args({16, 32, 1})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillAttentionRagged)
    ->Args({4, 128})
    ->Args({16, 32})
    ->UseRealTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::bench
