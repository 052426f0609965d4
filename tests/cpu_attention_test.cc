// Paged, batched attention against a naive dense softmax(QKᵀ/√d + mask)V.
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
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
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16),
                                            ::testing::Values(4, 3, 5)));

}  // namespace
}  // namespace tessera::cpu
