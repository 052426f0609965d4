// Paged, batched attention against a naive dense softmax(QKᵀ/√d + mask)V.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/backend/cpu/attention_kernels.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/kernels.h"
#include "engine/model/float16.h"
#include "gtest/gtest.h"

namespace tessera::cpu {
namespace {

struct SeqSpec {
  int32_t cached;  // tokens already in the cache before this step
  int32_t q_len;   // new tokens this step
};

// Full K/V history of one sequence: [kv_len, kv_heads, head_dim].
struct SeqData {
  std::vector<float> k, v, q;  // q: [q_len, heads, head_dim]
  std::vector<int32_t> blocks;
};

std::vector<float> Random(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Dense reference for one query row: position q_pos sees keys [0, q_pos].
void NaiveRow(const float* q, const SeqData& s, int32_t kv_len, int32_t q_pos, int kvh, int kv_heads,
              int head_dim, float* out) {
  std::vector<double> scores(kv_len);
  double mx = -1e300;
  for (int j = 0; j < kv_len; ++j) {
    double dot = 0;
    for (int d = 0; d < head_dim; ++d) dot += q[d] * s.k[(j * kv_heads + kvh) * head_dim + d];
    const double mask = j <= q_pos ? 0.0 : -std::numeric_limits<double>::infinity();
    scores[j] = dot / std::sqrt(double(head_dim)) + mask;
    mx = std::max(mx, scores[j]);
  }
  double den = 0;
  for (auto& sc : scores) den += (sc = std::exp(sc - mx));
  for (int d = 0; d < head_dim; ++d) {
    double acc = 0;
    for (int j = 0; j < kv_len; ++j) acc += scores[j] / den * s.v[(j * kv_heads + kvh) * head_dim + d];
    out[d] = static_cast<float>(acc);
  }
}

// What the int8 cache stores for each head_dim vector of x: q · scale.
void RoundTripInt8(std::vector<float>& x, int head_dim) {
  std::vector<int8_t> q(head_dim);
  for (size_t i = 0; i < x.size(); i += head_dim) {
    const float scale = QuantizeKvInt8(&x[i], head_dim, q.data());
    for (int d = 0; d < head_dim; ++d) x[i + d] = q[d] * scale;
  }
}

void RunCase(const std::vector<SeqSpec>& specs, int heads, int kv_heads, int head_dim,
             int block_size, uint64_t seed, DType kv_dtype = DType::kF32) {
  std::mt19937_64 rng(seed);
  CpuBackend backend(2);
  const int num_blocks = 64;
  ASSERT_TRUE(
      backend.AllocateKvCache({1, num_blocks, block_size, kv_heads, head_dim, kv_dtype}).ok());
  std::vector<int32_t> free_blocks;
  for (int b = num_blocks - 1; b >= 0; --b) free_blocks.push_back(b);  // scattered order
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  const int row = kv_heads * head_dim;
  std::vector<SeqData> data(specs.size());
  AttentionMetadata meta;
  meta.block_size = block_size;
  std::vector<float> k_new, v_new, q_all;
  for (size_t s = 0; s < specs.size(); ++s) {
    const int kv_len = specs[s].cached + specs[s].q_len;
    data[s].k = Random(kv_len * row, rng);
    data[s].v = Random(kv_len * row, rng);
    if (kv_dtype == DType::kF16) {  // the reference sees what the cache stores
      for (auto* m : {&data[s].k, &data[s].v}) {
        for (float& x : *m) x = HalfToFloat(FloatToHalf(x));
      }
    }
    if (kv_dtype == DType::kI8) {  // int8 with a scale per (token, KV head)
      for (auto* m : {&data[s].k, &data[s].v}) RoundTripInt8(*m, head_dim);
    }
    data[s].q = Random(specs[s].q_len * heads * head_dim, rng);
    for (int b = 0; b < (kv_len + block_size - 1) / block_size; ++b) {
      data[s].blocks.push_back(free_blocks.back());
      free_blocks.pop_back();
    }
  }
  // First write the cached prefixes (as earlier steps would have).
  for (size_t s = 0; s < specs.size(); ++s) {
    AttentionMetadata pre;
    pre.block_size = block_size;
    for (int t = 0; t < specs[s].cached; ++t) {
      pre.slot_mapping.push_back(data[s].blocks[t / block_size] * block_size + t % block_size);
    }
    pre.num_tokens = specs[s].cached;
    backend.KvAppend(0, data[s].k.data(), data[s].v.data(), pre);
  }
  for (size_t s = 0; s < specs.size(); ++s) {
    const int32_t start = meta.num_tokens;
    const int kv_len = specs[s].cached + specs[s].q_len;
    for (int t = specs[s].cached; t < kv_len; ++t) {
      meta.slot_mapping.push_back(data[s].blocks[t / block_size] * block_size + t % block_size);
      k_new.insert(k_new.end(), data[s].k.begin() + t * row, data[s].k.begin() + (t + 1) * row);
      v_new.insert(v_new.end(), data[s].v.begin() + t * row, data[s].v.begin() + (t + 1) * row);
    }
    q_all.insert(q_all.end(), data[s].q.begin(), data[s].q.end());
    meta.seqs.push_back({start, specs[s].q_len, kv_len, data[s].blocks.data()});
    meta.num_tokens += specs[s].q_len;
    meta.max_q_len = std::max(meta.max_q_len, specs[s].q_len);
    meta.max_kv_len = std::max(meta.max_kv_len, kv_len);
  }
  backend.KvAppend(0, k_new.data(), v_new.data(), meta);
  std::vector<float> out(meta.num_tokens * heads * head_dim);
  const AttentionShape shape{heads, kv_heads, head_dim, 1.0f / std::sqrt(float(head_dim))};
  backend.Attention(0, q_all.data(), shape, meta, out.data());
  std::vector<float> ref(head_dim);
  for (size_t s = 0; s < specs.size(); ++s) {
    const int kv_len = specs[s].cached + specs[s].q_len;
    for (int t = 0; t < specs[s].q_len; ++t) {
      for (int h = 0; h < heads; ++h) {
        NaiveRow(&data[s].q[(t * heads + h) * head_dim], data[s], kv_len, specs[s].cached + t,
                 h / (heads / kv_heads), kv_heads, head_dim, ref.data());
        const float* got = &out[((meta.seqs[s].q_start + t) * heads + h) * head_dim];
        for (int d = 0; d < head_dim; ++d) ASSERT_NEAR(got[d], ref[d], 1e-4) << s << " " << t << " " << h;
      }
    }
  }
}

TEST(PagedAttention, SinglePrefill) { RunCase({{0, 9}}, 4, 4, 8, 4, 1); }
TEST(PagedAttention, DecodeWithLongCache) { RunCase({{37, 1}}, 8, 2, 16, 16, 2); }
TEST(PagedAttention, MixedBatchGroupedQuery) {
  RunCase({{0, 5}, {20, 1}, {3, 7}, {0, 1}, {16, 16}}, 8, 4, 8, 4, 3);
}
TEST(PagedAttention, MultiQueryOneKvHead) { RunCase({{10, 3}, {0, 12}}, 6, 1, 4, 8, 4); }
TEST(PagedAttention, HalfPrecisionCacheMixedBatch) {
  RunCase({{0, 5}, {20, 1}, {3, 7}, {16, 16}}, 8, 4, 24, 4, 5, DType::kF16);
  RunCase({{33, 1}, {0, 40}}, 4, 2, 64, 16, 6, DType::kF16);
}
// The int8 cache: decode and prefill rows, GQA, blocks of 4 and 16 keys,
// head_dim 24 (a masked tail of each 16-lane chunk) and 64, against the
// reference over the dequantized keys and values.
TEST(PagedAttention, Int8CacheMixedBatch) {
  RunCase({{0, 5}, {20, 1}, {3, 7}, {16, 16}}, 8, 4, 24, 4, 9, DType::kI8);
  RunCase({{33, 1}, {0, 40}, {70, 1}, {5, 9}}, 4, 2, 64, 16, 10, DType::kI8);
  RunCase({{10, 3}, {0, 12}}, 6, 1, 8, 8, 11, DType::kI8);
}

// An int8 block holds each token-head's int8 vector and its f32 scale; the
// scales must sit at 4-byte offsets, which block_size · head_dim % 4 == 0
// guarantees, so other shapes are refused.
TEST(PagedAttention, Int8CacheSizesAndShapes) {
  EXPECT_EQ((KvStorageShape{2, 0, 16, 4, 64, DType::kI8}.BytesPerBlock()), 2u * 2 * 16 * 4 * 68);
  EXPECT_EQ((KvStorageShape{2, 0, 16, 4, 64, DType::kF16}.BytesPerBlock()), 2u * 2 * 16 * 4 * 128);
  CpuBackend backend(1);
  EXPECT_TRUE(backend.AllocateKvCache({1, 8, 3, 2, 4, DType::kI8}).ok());
  const absl::Status odd = backend.AllocateKvCache({1, 8, 3, 2, 5, DType::kI8});
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument) << odd;
  EXPECT_EQ(backend.AllocateKvCache({1, 8, 16, 2, 8, DType::kQ8_0}).code(),
            absl::StatusCode::kInvalidArgument);
}

// The cache type names the engine and tessera-eval take: DTypeName's names
// of f32, f16 and int8, and nothing else (auto is the engine's own).
TEST(PagedAttention, KvCacheTypeNames) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kI8}) {
    EXPECT_EQ(KvCacheDTypeFromName(DTypeName(dtype)), dtype) << DTypeName(dtype);
  }
  for (const char* other : {"auto", "bf16", "q8_0", "INT8", "i8", "f16 ", ""}) {
    EXPECT_EQ(KvCacheDTypeFromName(other), std::nullopt) << "'" << other << "'";
  }
}

// q = round(x / scale) with scale = max|x| / 127: the largest element maps
// to ±127, every element is within scale / 2, zero vectors get scale 0, and
// a NaN or an infinity gives a NaN scale (so it reaches the output).
TEST(PagedAttention, Int8QuantizeRoundTrip) {
  std::mt19937_64 rng(12);
  std::vector<float> x = Random(64, rng);
  std::vector<int8_t> q(64);
  const float scale = QuantizeKvInt8(x.data(), 64, q.data());
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_FLOAT_EQ(scale, amax / 127.0f);
  int extremes = 0;
  for (int i = 0; i < 64; ++i) {
    EXPECT_LE(std::fabs(x[i] - q[i] * scale), scale * 0.5f * (1 + 1e-5f)) << i;
    extremes += std::abs(q[i]) == 127;
  }
  EXPECT_GE(extremes, 1);
  std::vector<float> zeros(16, 0.0f);
  EXPECT_EQ(QuantizeKvInt8(zeros.data(), 16, q.data()), 0.0f);
  EXPECT_EQ(q[0], 0);
  // So small that 127 / max|x| overflows (subnormals among them): zeros
  // with scale 0, never the ±127 that an infinite 1 / scale would give.
  std::vector<float> tiny = {1e-38f, 0.0f, -2e-38f, 1e-45f, -0.0f, 3e-37f, 0.0f, 0.0f};
  std::fill(q.begin(), q.end(), int8_t{5});
  EXPECT_EQ(QuantizeKvInt8(tiny.data(), 8, q.data()), 0.0f);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q[i], 0) << i;
  // Small but above it: the usual bound holds.
  std::vector<float> small = {1e-30f, -3e-31f, 0.0f, 7e-31f};
  const float small_scale = QuantizeKvInt8(small.data(), 4, q.data());
  EXPECT_FLOAT_EQ(small_scale, 1e-30f / 127.0f);
  for (int i = 0; i < 4; ++i) EXPECT_LE(std::fabs(small[i] - q[i] * small_scale), small_scale * 0.5f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[2], 0);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    x[5] = bad;
    EXPECT_TRUE(std::isnan(QuantizeKvInt8(x.data(), 64, q.data())));
    EXPECT_EQ(q[5], 0);
  }
}

// The item prefetch of decode attention (UseKvItemPrefetch) reads block
// tables: forced on, decodes of sequences shorter than a block, a block
// long, and ending mid-block, with and without GQA groups, still match the
// reference (and under ASan, read no table past its end).
TEST(PagedAttention, DecodeWithItemPrefetchForcedOnAndOff) {
  for (KvItemPrefetch mode : {KvItemPrefetch::kOn, KvItemPrefetch::kOff}) {
    SetKvItemPrefetch(mode);
    RunCase({{0, 1}, {15, 1}, {40, 1}, {2, 1}, {31, 1}}, 8, 4, 16, 16, 7);
    RunCase({{0, 1}, {15, 1}, {40, 1}, {63, 1}}, 6, 6, 64, 16, 8, DType::kF16);
    RunCase({{0, 1}, {15, 1}, {40, 1}, {63, 1}}, 6, 2, 64, 16, 13, DType::kI8);
  }
  SetKvItemPrefetch(KvItemPrefetch::kAuto);
}

}  // namespace
}  // namespace tessera::cpu

namespace tessera::cpu {
namespace {

// Per-token data drawn from (seed, position), so that two runs covering the
// same positions see the same values.
std::vector<float> TokenData(uint64_t seed, int pos, int n) {
  std::mt19937_64 rng(seed * 100003 + pos);
  return Random(n, rng);
}

// Runs attention for `specs` (sequence s uses seed seed0 + s) and returns the
// output rows of sequence 0.
std::vector<float> FirstSeqRows(const std::vector<SeqSpec>& specs, uint64_t seed0,
                                DType kv_dtype, int bs) {
  const int heads = 4, kv_heads = 2, d = 16;
  CpuBackend backend(2);
  EXPECT_TRUE(backend.AllocateKvCache({1, 64, bs, kv_heads, d, kv_dtype}).ok());
  AttentionMetadata meta;
  meta.block_size = bs;
  std::vector<float> q_all;
  std::vector<std::vector<int32_t>> tables(specs.size());
  int32_t next_block = 0;
  for (size_t s = 0; s < specs.size(); ++s) {
    const int kv_len = specs[s].cached + specs[s].q_len;
    for (int b = 0; b < (kv_len + bs - 1) / bs; ++b) tables[s].push_back(next_block++);
    AttentionMetadata one;
    one.block_size = bs;
    one.num_tokens = 1;
    for (int t = 0; t < kv_len; ++t) {  // the whole history, as earlier steps would write it
      one.slot_mapping = {tables[s][t / bs] * bs + t % bs};
      backend.KvAppend(0, TokenData(seed0 + s, 2 * t, kv_heads * d).data(),
                       TokenData(seed0 + s, 2 * t + 1, kv_heads * d).data(), one);
    }
    for (int t = specs[s].cached; t < kv_len; ++t) {
      auto q = TokenData(seed0 + s + 7777, t, heads * d);
      q_all.insert(q_all.end(), q.begin(), q.end());
    }
    meta.seqs.push_back({meta.num_tokens, specs[s].q_len, kv_len, tables[s].data()});
    meta.num_tokens += specs[s].q_len;
    meta.max_kv_len = std::max(meta.max_kv_len, kv_len);
  }
  std::vector<float> out(meta.num_tokens * heads * d);
  backend.Attention(0, q_all.data(), {heads, kv_heads, d, 0.25f}, meta, out.data());
  return std::vector<float>(out.begin(), out.begin() + specs[0].q_len * heads * d);
}

// (KV cache type, block size): odd block sizes make paged blocks start at
// odd key indices.
class PaddedPrefill : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  std::vector<float> Rows(const std::vector<SeqSpec>& specs, uint64_t seed0) {
    return FirstSeqRows(specs, seed0, std::get<0>(GetParam()), std::get<1>(GetParam()));
  }
};

TEST_P(PaddedPrefill, PaddingNeverChangesTheOutput) {
  const auto alone = Rows({{0, 6}}, 100);
  const auto padded = Rows({{0, 6}, {3, 17}, {0, 2}, {20, 1}}, 100);
  EXPECT_EQ(alone, padded);  // bit for bit
}

TEST_P(PaddedPrefill, PrefillRowsEqualDecodesOfSamePositions) {
  // Positions 0..10 as one prefill (query rows are computed in groups), and
  // each position as a decode step over the same cached history: every
  // prefill row must match its decode bit for bit.
  const auto prefill = Rows({{0, 11}}, 7);
  for (int pos = 0; pos < 11; ++pos) {
    const auto decode = Rows({{pos, 1}}, 7);
    ASSERT_EQ(decode.size(), 4u * 16u);
    EXPECT_EQ(std::vector<float>(prefill.begin() + pos * 64, prefill.begin() + (pos + 1) * 64),
              decode)
        << "position " << pos;
  }
}

INSTANTIATE_TEST_SUITE_P(CacheTypesAndBlocks, PaddedPrefill,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kI8),
                                            ::testing::Values(4, 3, 5)));

}  // namespace
}  // namespace tessera::cpu

// --- The row kernels of each path, called directly ---
namespace tessera::cpu {
namespace {

struct KernelPath {
  const char* name;
  bool (*available)();
  AttendRowFn<float> row_f32;
  AttendRowFn<uint16_t> row_f16;
  AttendRowsFn<float> rows_f32;
  AttendRowsFn<uint16_t> rows_f16;
  AttendRowFn<int8_t> row_i8;
  AttendRowsFn<int8_t> rows_i8;
};

bool Always() { return true; }

const KernelPath kPaths[] = {
    {"portable", &Always, &AttendRowPortable<float>, &AttendRowPortable<uint16_t>,
     &AttendRowsPortable<float>, &AttendRowsPortable<uint16_t>, &AttendRowPortable<int8_t>,
     &AttendRowsPortable<int8_t>},
    {"avx2", &CpuHasAvx2Kernels, &AttendRowAvx2<float>, &AttendRowAvx2<uint16_t>,
     &AttendRowsAvx2<float>, &AttendRowsAvx2<uint16_t>, &AttendRowAvx2<int8_t>,
     &AttendRowsAvx2<int8_t>},
    {"avx512", &CpuHasAvx512Kernels, &AttendRowAvx512<float>, &AttendRowAvx512<uint16_t>,
     &AttendRowsAvx512<float>, &AttendRowsAvx512<uint16_t>, &AttendRowAvx512<int8_t>,
     &AttendRowsAvx512<int8_t>},
};

// One sequence of `len` keys for KV head 1 of 2, stored twice: in shuffled
// paged blocks of `bs` ([head_dim][bs] keys, [bs][head_dim] values), and as
// one contiguous padded block of a multiple of 16 slots (the prefill layout,
// zeros in padding), both as T. kf/vf: the stored values as f32, [len][d].
// An int8 fixture quantizes each key and value vector (QuantizeKvInt8),
// puts each head's block_size scales after its part of a block, and has no
// contiguous layout (the int8 cache is paged only).
template <typename T>
struct KvFixture {
  int32_t d, bs, len, pad;
  std::vector<int32_t> table;
  std::vector<T> paged_k, paged_v, flat_k, flat_v;
  std::vector<float> kf, vf;

  static constexpr bool kInt8 = std::is_same_v<T, int8_t>;
  static T Store(float x) {
    if constexpr (std::is_same_v<T, float>) return x;
    else if constexpr (kInt8) return static_cast<T>(std::clamp(x, -127.0f, 127.0f));
    else return FloatToHalf(x);
  }
  static float Value(T x) {
    if constexpr (std::is_same_v<T, uint16_t>) return HalfToFloat(x);
    else return static_cast<float>(x);
  }
  int64_t Head() const { return int64_t{d} * bs + (kInt8 ? 4 * bs : 0); }
  // Token j's head part in paged_k / paged_v (this sequence is KV head 1 of
  // 2), and j's place in its block.
  int64_t HeadBase(int32_t j) const { return int64_t{table[j / bs]} * 2 * Head() + Head(); }
  // int8: token j's key and value scales.
  void SetScales(int32_t j, float k_scale, float v_scale) {
    static_assert(kInt8);
    const int64_t at = HeadBase(j) + int64_t{d} * bs + 4 * (j % bs);
    std::memcpy(&paged_k[at], &k_scale, 4);
    std::memcpy(&paged_v[at], &v_scale, 4);
  }

  // Draws key or value j's d elements: what the cache holds, and (int8)
  // its scale.
  float Draw(std::mt19937_64& rng, T* stored, float* as_float) const {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(d);
    for (float& e : x) e = nd(rng);
    float scale = 1.0f;
    if constexpr (kInt8) {
      scale = QuantizeKvInt8(x.data(), d, stored);
    } else {
      for (int32_t c = 0; c < d; ++c) stored[c] = Store(x[c]);
    }
    for (int32_t c = 0; c < d; ++c) as_float[c] = Value(stored[c]) * scale;
    return scale;
  }

  KvFixture(int32_t d_, int32_t bs_, int32_t len_, std::mt19937_64& rng)
      : d(d_), bs(bs_), len(len_), pad((len_ + 15) / 16 * 16) {
    const int32_t blocks = (len + bs - 1) / bs;
    table.resize(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    paged_k.assign(blocks * 2 * Head(), Store(1e4f));  // other slots: large, must be ignored
    paged_v.assign(blocks * 2 * Head(), Store(1e4f));
    flat_k.assign(size_t(pad) * d, Store(0.0f));
    flat_v.assign(size_t(pad) * d, Store(0.0f));
    kf.resize(size_t(len) * d);
    vf.resize(size_t(len) * d);
    std::vector<T> k(d), v(d);
    for (int32_t j = 0; j < len; ++j) {
      const int64_t base = HeadBase(j), o = j % bs;
      const float k_scale = Draw(rng, k.data(), &kf[size_t(j) * d]);
      const float v_scale = Draw(rng, v.data(), &vf[size_t(j) * d]);
      for (int32_t c = 0; c < d; ++c) {
        paged_k[base + c * bs + o] = k[c];
        paged_v[base + o * d + c] = v[c];
        flat_k[size_t(c) * pad + j] = k[c];
        flat_v[size_t(j) * d + c] = v[c];
      }
      if constexpr (kInt8) SetScales(j, k_scale, v_scale);
    }
  }
  // int8: the key and value scales of tokens [0, count) become NaN (what a
  // vector holding infinity or NaN stores); rows whose window starts at or
  // after `count` must not see them.
  void PoisonScales(int32_t count) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int32_t j = 0; j < count; ++j) SetScales(j, nan, nan);
  }
  // int8: token j's key and value become what a zero vector stores (int8
  // zeros, scale 0), in the cache and in the reference.
  void ZeroToken(int32_t j) {
    const int64_t base = HeadBase(j), o = j % bs;
    for (int32_t c = 0; c < d; ++c) {
      paged_k[base + c * bs + o] = 0;
      paged_v[base + o * d + c] = 0;
      kf[size_t(j) * d + c] = vf[size_t(j) * d + c] = 0.0f;
    }
    SetScales(j, 0.0f, 0.0f);
  }
  KeyBlocksT<T> PagedKeys() const {
    return {paged_k.data(), table.data(), bs, 2 * Head(), Head(), kInt8 ? int64_t{d} * bs : 0};
  }
  KvRowsT<T> PagedValues() const {
    return {paged_v.data(), table.data(), bs, 2 * Head(), d, Head(),
            kInt8 ? int64_t{d} * bs : 0};
  }
  // The contiguous layout has no scales: float caches only.
  KeyBlocksT<T> FlatKeys() const {
    static_assert(!kInt8);
    return {flat_k.data(), nullptr, pad, 0, 0};
  }
  KvRowsT<T> FlatValues() const {
    static_assert(!kInt8);
    return {flat_v.data(), nullptr, pad, 0, d, 0};
  }

  // softmax(q·kᵀ·scale) over keys [first, visible), times V, in f64.
  std::vector<double> Reference(const float* q, float scale, int32_t first,
                                int32_t visible) const {
    std::vector<double> s(visible), out(d, 0.0);
    double mx = -1e300, den = 0;
    for (int32_t j = first; j < visible; ++j) {
      double dot = 0;
      for (int32_t c = 0; c < d; ++c) dot += double{q[c]} * kf[size_t(j) * d + c];
      mx = std::max(mx, s[j] = dot * scale);
    }
    for (int32_t j = first; j < visible; ++j) den += (s[j] = std::exp(s[j] - mx));
    for (int32_t j = first; j < visible; ++j) {
      for (int32_t c = 0; c < d; ++c) out[c] += s[j] / den * vf[size_t(j) * d + c];
    }
    return out;
  }
};

using KeyRanges = std::vector<std::pair<int32_t, int32_t>>;  // (first, visible) per row

// Rows [i0, i0 + n) of `ranges` (queries at q_all, d apiece) in one
// AttendRows call, over the padded layout (flat, float caches) or the paged
// cache: each row's output.
template <typename T>
std::vector<std::vector<float>> GroupOutputs(AttendRowsFn<T> rows, const KvFixture<T>& kv,
                                             bool flat, const KeyRanges& ranges,
                                             const std::vector<float>& q_all, size_t i0, int n,
                                             float scale) {
  const int32_t d = kv.d;
  const float* q[kMaxAttendRows];
  float* out[kMaxAttendRows];
  float* sc[kMaxAttendRows];
  int32_t first[kMaxAttendRows], visible[kMaxAttendRows];
  std::vector<std::vector<float>> outs(n, std::vector<float>(d)),
      scores(n, std::vector<float>(kv.pad, -7.0f));
  for (int r = 0; r < n; ++r) {
    q[r] = &q_all[(i0 + r) * d];
    out[r] = outs[r].data();
    sc[r] = scores[r].data();
    first[r] = ranges[i0 + r].first;
    visible[r] = ranges[i0 + r].second;
  }
  if constexpr (!KvFixture<T>::kInt8) {
    if (flat) rows(q, n, kv.FlatKeys(), kv.FlatValues(), d, scale, first, visible, sc, out);
  }
  if (!flat) rows(q, n, kv.PagedKeys(), kv.PagedValues(), d, scale, first, visible, sc, out);
  return outs;
}

// Each row of `ranges` (a query drawn from rng; with `sharp`, every third
// scaled by 25 so that score gaps of ~100 underflow e^x to 0) through `row`
// on the paged cache against the reference; then groups of
// 1..kMaxAttendRows rows through `rows`, over the padded prefill layout
// (float caches) and the paged cache: each row equals its `row` output bit
// for bit.
template <typename T>
void ExpectRowKernelsMatch(AttendRowFn<T> row, AttendRowsFn<T> rows, const KvFixture<T>& kv,
                           const KeyRanges& ranges, bool sharp, std::mt19937_64& rng,
                           const std::string& label) {
  const int32_t d = kv.d;
  const float scale = 1.0f / std::sqrt(float(d));
  std::vector<float> q_all;
  std::vector<std::vector<float>> want;  // `row` on the paged cache
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [first, visible] = ranges[i];
    std::vector<float> q = Random(d, rng);
    if (sharp && i % 3 == 2) {
      for (float& x : q) x *= 25.0f;
    }
    q_all.insert(q_all.end(), q.begin(), q.end());
    std::vector<float> scores(visible, -7.0f), out(d, -7.0f);
    row(q.data(), kv.PagedKeys(), kv.PagedValues(), d, scale, first, visible, scores.data(),
        out.data());
    const std::vector<double> ref = kv.Reference(q.data(), scale, first, visible);
    for (int32_t c = 0; c < d; ++c) {
      ASSERT_NEAR(out[c], ref[c], 1e-4) << label << " first " << first << " visible " << visible
                                        << " c " << c;
    }
    want.push_back(out);
  }
  for (int n = 1; n <= kMaxAttendRows; ++n) {
    for (size_t i0 = 0; i0 + n <= ranges.size(); i0 += n) {
      for (bool flat : {true, false}) {
        if (flat && KvFixture<T>::kInt8) continue;  // the int8 cache is paged only
        const std::vector<std::vector<float>> outs =
            GroupOutputs(rows, kv, flat, ranges, q_all, i0, n, scale);
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(outs[r], want[i0 + r]) << label << " " << n << " rows from " << i0 << ", row "
                                           << r << (flat ? " (padded)" : " (paged)");
        }
      }
    }
  }
}

// (path, KV type: 0 f32, 1 f16, 2 int8, head_dim, block size)
const char* const kKvTypeNames[] = {"_f32", "_f16", "_int8"};
class RowKernels : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {
 protected:
  void SetUp() override {
    if (!Path().available()) GTEST_SKIP() << Path().name << " kernels need a CPU that has them";
  }
  const KernelPath& Path() const { return kPaths[std::get<0>(GetParam())]; }

  template <typename T>
  void Check(AttendRowFn<T> row, AttendRowsFn<T> rows) {
    const int32_t d = std::get<2>(GetParam()), bs = std::get<3>(GetParam());
    std::mt19937_64 rng(d * 131 + bs);
    const KvFixture<T> kv(d, bs, 101, rng);
    // (first, visible): windows, single keys, counts that are not multiples
    // of 8 or of the block size.
    const KeyRanges ranges = {
        {0, 1}, {0, 7}, {0, 8}, {0, 9}, {0, 17}, {0, 33}, {0, 101}, {3, 12}, {20, 21},
        {37, 100}, {64, 101}, {5, 6}};
    ExpectRowKernelsMatch(row, rows, kv, ranges, /*sharp=*/true, rng, "");
  }
};

TEST_P(RowKernels, MatchReferenceAndRowsEqualRow) {
  if (std::get<1>(GetParam()) == 1) return Check<uint16_t>(Path().row_f16, Path().rows_f16);
  if (std::get<1>(GetParam()) == 2) return Check<int8_t>(Path().row_i8, Path().rows_i8);
  Check<float>(Path().row_f32, Path().rows_f32);
}

INSTANTIATE_TEST_SUITE_P(
    PathsTypesShapes, RowKernels,
    ::testing::Combine(::testing::Values(0, 1, 2), ::testing::Values(0, 1, 2),
                       ::testing::Values(4, 20, 64, 80, 96, 128), ::testing::Values(16, 32, 5)),
    [](const auto& info) {
      return std::string(kPaths[std::get<0>(info.param)].name) +
             kKvTypeNames[std::get<1>(info.param)] + "_d" +
             std::to_string(std::get<2>(info.param)) + "_bs" +
             std::to_string(std::get<3>(info.param));
    });

// A sliding window's keys before `first` hold NaN scales (tokens whose
// vectors held infinity or NaN): no path lets them into the rows that start
// after them, one row at a time or in groups, where scaling the zero
// probabilities of those keys would give NaN. Zero vectors inside the
// windows (scale 0) count as keys of score 0 and values of 0.
TEST(Int8RowKernels, ScalesBeforeTheWindowAreNeverRead) {
  constexpr int32_t kPoisoned = 3;
  const KeyRanges ranges = {
      {3, 12}, {20, 21}, {37, 100}, {64, 101}, {5, 6}, {3, 4}};
  const std::vector<std::pair<int32_t, int32_t>> shapes = {{4, 5}, {64, 16}, {80, 32}};  // d, bs
  for (const KernelPath& path : kPaths) {
    if (!path.available()) continue;
    for (const auto& [d, bs] : shapes) {
      std::mt19937_64 rng(d * 7 + bs);
      KvFixture<int8_t> kv(d, bs, 101, rng);
      kv.PoisonScales(kPoisoned);
      for (int32_t j : {4, 10, 64, 99}) kv.ZeroToken(j);
      ASSERT_NO_FATAL_FAILURE(ExpectRowKernelsMatch(
          path.row_i8, path.rows_i8, kv, ranges, /*sharp=*/false, rng,
          std::string(path.name) + " d " + std::to_string(d) + " bs " + std::to_string(bs)));
    }
  }
}

TEST(KernelSelection, FollowsSelectedPath) {
  const CpuKernelPath path = SelectedKernelPath();
  const KernelPath& want = kPaths[static_cast<int>(path)];
  EXPECT_EQ(SelectAttendRow<float>(), want.row_f32) << KernelPathName(path);
  EXPECT_EQ(SelectAttendRow<uint16_t>(), want.row_f16);
  EXPECT_EQ(SelectAttendRows<float>(), want.rows_f32);
  EXPECT_EQ(SelectAttendRows<uint16_t>(), want.rows_f16);
  EXPECT_EQ(SelectAttendRow<int8_t>(), want.row_i8);
  EXPECT_EQ(SelectAttendRows<int8_t>(), want.rows_i8);
}

// Floats whose conversion is hard: zeros, infinities, NaNs (quiet and
// signalling, with payloads), float and half subnormals, ties in the normal
// and subnormal ranges, the overflow threshold, then a stride through every
// bit pattern.
std::vector<float> HardFloats() {
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u,
                                0xff802000u, 0x7fffffffu, 0x00000001u, 0x807fffffu,
                                0x33000000u, 0x33000001u, 0x33800000u, 0x387fe000u,
                                0x387ff000u, 0x38800000u, 0x477fe000u, 0x477fefffu,
                                0x477ff000u, 0x477ff001u, 0x7f7fffffu};
  for (uint32_t top = 0; top < (1u << 19); ++top) {  // sign, exponent, 10 mantissa bits
    for (uint32_t low : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu}) {
      bits.push_back(top << 13 | low);
    }
  }
  for (uint64_t b = 7; b < (uint64_t{1} << 32); b += 9973) bits.push_back(uint32_t(b));
  std::vector<float> out(bits.size());
  std::memcpy(out.data(), bits.data(), bits.size() * sizeof(float));
  return out;
}

void ExpectHalvesMatch(void (*convert)(const float*, uint16_t*, int64_t)) {
  const std::vector<float> src = HardFloats();
  std::vector<uint16_t> got(src.size(), 0xdead);
  convert(src.data(), got.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(got[i], FloatToHalf(src[i])) << std::hex << std::bit_cast<uint32_t>(src[i]);
  }
  // Every tail length, with the neighbours left alone.
  for (int64_t n = 0; n <= 33; ++n) {
    std::vector<uint16_t> dst(n + 2, 0xbeef);
    convert(src.data() + 5, dst.data() + 1, n);
    EXPECT_EQ(dst[0], 0xbeef);
    EXPECT_EQ(dst[n + 1], 0xbeef) << n;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dst[i + 1], FloatToHalf(src[5 + i])) << n;
  }
}

TEST(FloatsToHalves, Avx2EqualsFloatToHalf) {
  if (!CpuHasAvx2Kernels()) GTEST_SKIP() << "needs AVX2 and F16C";
  ExpectHalvesMatch(&FloatsToHalvesAvx2);
}

TEST(FloatsToHalves, Avx512EqualsFloatToHalf) {
  if (!CpuHasAvx512Kernels()) GTEST_SKIP() << "needs AVX-512";
  ExpectHalvesMatch(&FloatsToHalvesAvx512);
}

TEST(FloatsToHalves, SelectedPathEqualsFloatToHalf) { ExpectHalvesMatch(&FloatsToHalves); }

}  // namespace
}  // namespace tessera::cpu
