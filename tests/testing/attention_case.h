// A random paged-attention step for parity tests: sequences with given
// (q_len, kv_len), block tables drawn from a shuffled pool, q/k/v rows, and
// the AttentionMetadata the model would pass. Decode rows are q_len 1.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"

namespace tessera::testing {

struct AttentionCase {
  AttentionShape shape;
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  std::vector<std::vector<int32_t>> tables;  // per sequence
  AttentionMetadata meta;
  std::vector<float> q;     // [num_tokens, heads, d]
  std::vector<float> k, v;  // [num_tokens, kv_heads, d]: this step's new rows
  // Rows cached before this step, appended first: [cached_tokens, kv_heads, d].
  std::vector<float> k_prefix, v_prefix;
  AttentionMetadata prefix_meta;  // writes the cached rows (no attention)
};

inline std::vector<float> RandomFloats(size_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// seqs: (q_len, kv_len) with kv_len >= q_len.
inline AttentionCase MakeAttentionCase(const AttentionShape& shape, int32_t block_size,
                                       const std::vector<std::pair<int32_t, int32_t>>& seqs,
                                       uint64_t seed) {
  AttentionCase c;
  c.shape = shape;
  c.block_size = block_size;
  std::mt19937_64 rng(seed);
  int32_t blocks_needed = 0;
  for (auto [q_len, kv_len] : seqs) blocks_needed += (kv_len + block_size - 1) / block_size;
  c.num_blocks = blocks_needed + 3;  // a few unused blocks
  std::vector<int32_t> pool(c.num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  c.meta.block_size = c.prefix_meta.block_size = block_size;
  int32_t next = 0;
  for (auto [q_len, kv_len] : seqs) {
    std::vector<int32_t> table(pool.begin() + next,
                               pool.begin() + next + (kv_len + block_size - 1) / block_size);
    next += static_cast<int32_t>(table.size());
    c.tables.push_back(std::move(table));
  }
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto [q_len, kv_len] = seqs[s];
    const std::vector<int32_t>& t = c.tables[s];
    for (int32_t pos = 0; pos < kv_len; ++pos) {
      const int32_t slot = t[pos / block_size] * block_size + pos % block_size;
      (pos < kv_len - q_len ? c.prefix_meta.slot_mapping : c.meta.slot_mapping).push_back(slot);
    }
    c.meta.seqs.push_back({c.meta.num_tokens, q_len, kv_len, t.data()});
    c.meta.num_tokens += q_len;
    c.meta.max_q_len = std::max(c.meta.max_q_len, q_len);
    c.meta.max_kv_len = std::max(c.meta.max_kv_len, kv_len);
  }
  c.prefix_meta.num_tokens = static_cast<int32_t>(c.prefix_meta.slot_mapping.size());
  const size_t kv_row = size_t(shape.num_kv_heads) * shape.head_dim;
  c.q = RandomFloats(size_t(c.meta.num_tokens) * shape.num_heads * shape.head_dim, rng);
  c.k = RandomFloats(c.meta.num_tokens * kv_row, rng);
  c.v = RandomFloats(c.meta.num_tokens * kv_row, rng);
  c.k_prefix = RandomFloats(c.prefix_meta.num_tokens * kv_row, rng);
  c.v_prefix = RandomFloats(c.prefix_meta.num_tokens * kv_row, rng);
  return c;
}

}  // namespace tessera::testing
