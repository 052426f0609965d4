#include "engine/backend/cpu/quant_linear.h"

#include <cmath>
#include <atomic>
#include <cstring>

#include "engine/model/float16.h"
#include "engine/quant/blocks.h"
#include "engine/util/thread_pool.h"

namespace tessera::cpu {

QuantRecord QuantRecordOf(DType dtype) {
  const quant::QuantType type = QuantTypeOf(dtype);
  const quant::AffineForm form = quant::AffineFormOf(type);
  QuantRecord r;
  r.group = form.group;
  r.groups_per_super = form.groups_per_super;
  r.signed_q = form.signed_q;
  r.has_b = form.has_b;
  r.per_group_ints = form.per_group_ints;
  r.sb_const = form.sb_const;
  r.values = form.values;
  r.zero = form.zero;
  r.nibbles = type == quant::QuantType::kQ4_0 || type == quant::QuantType::kQ4_1 ||
              type == quant::QuantType::kQ4_K || type == quant::QuantType::kQ2_K ||
              type == quant::QuantType::kQ3_K || form.values != nullptr;
  constexpr int32_t kRows = static_cast<int32_t>(kQuantTileRows);
  r.value_bytes = kRows * r.group / (r.nibbles ? 2 : 1);
  r.bytes = r.value_bytes + (r.per_group_ints ? kRows * (r.has_b ? 2 : 1) : 0);
  r.header_bytes = kRows * 2 * (r.has_b ? 2 : 1);
  r.super_bytes = r.header_bytes + r.groups_per_super * r.bytes;
  return r;
}

int64_t ActivationBlockOf(DType dtype) {
  return QuantRecordOf(dtype).per_group_ints ? kActSuperBlock : kActBlock;
}

size_t QuantPackedBytes(DType dtype, int64_t rows, int64_t cols) {
  const QuantRecord rec = QuantRecordOf(dtype);
  return static_cast<size_t>(NumQuantTiles(rows) * QuantTileBytes(rec, cols));
}

namespace {

// Byte offset of value (row r, input c) of a group within its record's
// values, and whether it sits in the high nibble.
inline int64_t ValueOffset(const QuantRecord& rec, int64_t r, int64_t c, bool* high) {
  const int64_t quad = c / 4, lane = c % 4;
  if (rec.nibbles) {
    *high = quad % 2 == 1;
    return 32 * (quad / 2) + 4 * r + lane;
  }
  *high = false;
  return 32 * quad + 4 * r + lane;
}

// Row r's integer value at input c of a record.
inline int ValueAt(const QuantRecord& rec, const uint8_t* record, int64_t r, int64_t c) {
  bool high = false;
  const uint8_t byte = record[ValueOffset(rec, r, c, &high)];
  if (!rec.nibbles) return rec.signed_q ? static_cast<int8_t>(byte) : byte - rec.zero;
  const int nibble = high ? byte >> 4 : byte & 0x0F;
  return rec.values != nullptr ? rec.values[nibble] : nibble - rec.zero;
}

// The per-row scale and offset of group g: a = A·sa, b = B·sb (b = 0 for
// types without offsets), exact products.
inline void GroupAffine(const QuantRecord& rec, const uint8_t* tile, int64_t g, int64_t r,
                        float* a, float* b) {
  const uint8_t* header = QuantSuperAt(rec, tile, g / rec.groups_per_super);
  const uint8_t* ints = QuantRecordAt(rec, tile, g) + rec.value_bytes;
  uint16_t h[2] = {0, 0};
  std::memcpy(&h[0], header + 2 * r, 2);
  if (rec.has_b) std::memcpy(&h[1], header + 2 * (kQuantTileRows + r), 2);
  const float sa = rec.per_group_ints ? static_cast<int8_t>(ints[r]) : 1;
  const float sb = rec.per_group_ints && rec.has_b ? static_cast<int8_t>(ints[kQuantTileRows + r])
                                                   : rec.sb_const;
  *a = HalfToFloat(h[0]) * sa;
  *b = rec.has_b ? HalfToFloat(h[1]) * sb : 0.0f;
}

struct UnpackedRow {
  std::vector<uint8_t> q;
  std::vector<int8_t> sa, sb;
  std::vector<uint16_t> A, B;
  explicit UnpackedRow(const QuantRecord& rec, int64_t cols)
      : q(cols), sa(cols / rec.group), sb(sa.size()),
        A(sa.size() / rec.groups_per_super), B(A.size()) {}
};

void PackTile(const uint8_t* src, const Weight& dst, const QuantRecord& rec, int64_t t,
              UnpackedRow& u) {
  const int64_t groups = dst.cols / rec.group;
  const size_t row_bytes = DTypeRowBytes(dst.dtype, dst.cols);
  uint8_t* tile = static_cast<uint8_t*>(const_cast<void*>(dst.data)) + t * QuantTileBytes(rec, dst.cols);
  std::memset(tile, 0, static_cast<size_t>(QuantTileBytes(rec, dst.cols)));
  for (int64_t r = 0; r < kQuantTileRows && t * kQuantTileRows + r < dst.rows; ++r) {
    quant::UnpackAffine(QuantTypeOf(dst.dtype), src + (t * kQuantTileRows + r) * row_bytes, dst.cols,
                        {u.q.data(), u.sa.data(), u.sb.data(), u.A.data(), u.B.data()});
    for (int64_t s = 0; s < groups / rec.groups_per_super; ++s) {
      uint8_t* header = QuantSuperAt(rec, tile, s);
      std::memcpy(header + 2 * r, &u.A[s], 2);
      if (rec.has_b) std::memcpy(header + 2 * (kQuantTileRows + r), &u.B[s], 2);
    }
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* record = QuantRecordAt(rec, tile, g);
      for (int64_t c = 0; c < rec.group; ++c) {
        bool high = false;
        const int64_t off = ValueOffset(rec, r, c, &high);
        const uint8_t v = u.q[g * rec.group + c];
        record[off] |= high ? static_cast<uint8_t>(v << 4) : v;
      }
      if (rec.per_group_ints) {
        record[rec.value_bytes + r] = static_cast<uint8_t>(u.sa[g]);
        if (rec.has_b) record[rec.value_bytes + kQuantTileRows + r] = static_cast<uint8_t>(u.sb[g]);
      }
    }
  }
}

}  // namespace

void PackQuantWeight(const void* row_major, const Weight& dst, ThreadPool& pool) {
  const QuantRecord rec = QuantRecordOf(dst.dtype);
  const auto* src = static_cast<const uint8_t*>(row_major);
  pool.ParallelFor(NumQuantTiles(dst.rows), 1, [&](int64_t t0, int64_t t1) {
    UnpackedRow u(rec, dst.cols);
    for (int64_t t = t0; t < t1; ++t) PackTile(src, dst, rec, t, u);
  });
}

float QuantTileAt(const Weight& w, int64_t j, int64_t p) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  const uint8_t* tile = static_cast<const uint8_t*>(w.data) + (j / kQuantTileRows) * QuantTileBytes(rec, w.cols);
  const int64_t g = p / rec.group, r = j % kQuantTileRows;
  float a, b;
  GroupAffine(rec, tile, g, r, &a, &b);
  return a * static_cast<float>(ValueAt(rec, QuantRecordAt(rec, tile, g), r, p % rec.group)) + b;
}

void PrepareQuantizedRows(int64_t n, int64_t k, int64_t block, QuantizedRows& out) {
  static std::atomic<uint64_t> generations{0};
  out.generation = ++generations;
  out.n = n, out.k = k, out.block = block;
  if (out.q.size() < static_cast<size_t>(n * k)) out.q.resize(static_cast<size_t>(n * k));
  if (out.d.size() < static_cast<size_t>(n * k / block)) {
    out.d.resize(static_cast<size_t>(n * k / block));
  }
  if (out.sums.size() < static_cast<size_t>(n * k / kActSumBlock)) {
    out.sums.resize(static_cast<size_t>(n * k / kActSumBlock));
  }
  const size_t quads = static_cast<size_t>((n + kQuadRows - 1) / kQuadRows * kQuadRows * k / 4);
  if (out.quads.size() < quads) out.quads.resize(quads);
}

const RowSteps& GatherRowSteps(const QuantizedRows& x, int64_t group) {
  thread_local RowSteps steps;
  if (x.generation != 0 && steps.generation == x.generation && steps.group == group) return steps;
  const int64_t groups = x.k / group, n = x.n;
  const int64_t d_stride = x.k / x.block, sum_stride = x.k / kActSumBlock;
  const size_t size = static_cast<size_t>(groups * n + kRowStepsPad);
  if (steps.dx.size() < size) {
    steps.dx.resize(size), steps.dsum.resize(size), steps.xsum.resize(size);
    steps.xpair.resize(size);
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first = g * group;
      const float dx = x.d[i * d_stride + first / x.block];
      int32_t xsum = x.sums[i * sum_stride + first / kActSumBlock];
      if (group == 32) xsum += x.sums[i * sum_stride + first / kActSumBlock + 1];
      steps.dx[g * n + i] = dx;
      steps.xsum[g * n + i] = xsum;
      steps.dsum[g * n + i] = dx * static_cast<float>(xsum);
    }
    for (int64_t h = 0; x.block == kActSuperBlock && h < groups / 2; ++h) {
      const uint32_t lo = static_cast<uint16_t>(steps.xsum[2 * h * n + i]);
      const uint32_t hi = static_cast<uint16_t>(steps.xsum[(2 * h + 1) * n + i]);
      steps.xpair[h * n + i] = static_cast<int32_t>(lo | hi << 16);
    }
  }
  steps.generation = x.generation, steps.group = group;
  return steps;
}

const int8_t* RowTilesOf(const QuantizedRows& x) {
  thread_local std::vector<int8_t> buffer;
  thread_local int8_t* tiles = nullptr;  // in buffer, 64-byte aligned
  thread_local uint64_t generation = 0;
  if (x.generation != 0 && generation == x.generation) return tiles;
  const int64_t blocks = (x.n + kRowTileRows - 1) / kRowTileRows;
  const size_t bytes = static_cast<size_t>(blocks * kRowTileRows * x.k);
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  tiles = Aligned64(buffer);
  // Rows past n (the rest of the last block) are zero.
  for (int64_t i = 0; i < blocks * kRowTileRows; ++i) {
    for (int64_t c = 0; c < x.k; c += kRowTileInputs) {
      int8_t* dst = tiles + (RowTileAt(tiles, x, i / kRowTileRows * kRowTileRows, c) - tiles) +
                    (i % kRowTileRows) * kRowTileInputs;
      if (i < x.n) std::memcpy(dst, x.q.data() + i * x.k + c, kRowTileInputs);
      else std::memset(dst, 0, kRowTileInputs);
    }
  }
  generation = x.generation;
  return tiles;
}

void InterleaveRow(QuantizedRows& out, int64_t i) {
  const int64_t quads = out.k / 4;
  int32_t* dst = out.quads.data() + (i / kQuadRows) * quads * kQuadRows + i % kQuadRows;
  const int8_t* src = out.q.data() + i * out.k;
  for (int64_t u = 0; u < quads; ++u) std::memcpy(dst + u * kQuadRows, src + 4 * u, 4);
}

void QuantizeActivations(const float* x, int64_t begin, int64_t end, QuantizedRows& out) {
  const int64_t k = out.k, block = out.block;
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t blk = 0; blk < k / block; ++blk) {
      const float* v = x + i * k + blk * block;
      float amax = 0.0f;
      for (int64_t c = 0; c < block; ++c) amax = std::max(amax, std::fabs(v[c]));
      // A block whose step is below the normal floats (|x| < 1.5e-36, or
      // NaN) is zero: 1/d would overflow.
      const float d = ActivationStep(amax);
      const float inv = d != 0.0f ? 1.0f / d : 0.0f;
      int8_t* q = out.q.data() + i * k + blk * block;
      int32_t* sums = out.sums.data() + i * (k / kActSumBlock) + blk * (block / kActSumBlock);
      for (int64_t c = 0; c < block; ++c) {
        q[c] = static_cast<int8_t>(std::nearbyint(v[c] * inv));
        sums[c / kActSumBlock] = (c % kActSumBlock ? sums[c / kActSumBlock] : 0) + q[c];
      }
      out.d[i * (k / block) + blk] = d;
    }
    InterleaveRow(out, i);
  }
}

namespace {

// Σ q_w·q_x of group g of a tile against xq (the group's activations), for
// each of the tile's rows.
void GroupDots(const QuantRecord& rec, const uint8_t* tile, int64_t g, const int8_t* xq,
               int32_t dot[kQuantTileRows]) {
  const uint8_t* record = QuantRecordAt(rec, tile, g);
  for (int64_t r = 0; r < kQuantTileRows; ++r) {
    dot[r] = 0;
    for (int64_t c = 0; c < rec.group; ++c) dot[r] += ValueAt(rec, record, r, c) * xq[c];
  }
}

// Σ q_x of row i over group g.
int32_t GroupSum(const QuantizedRows& x, int64_t i, int64_t g, int64_t group) {
  const int32_t* sums = x.sums.data() + i * (x.k / kActSumBlock) + g * group / kActSumBlock;
  return group == 32 ? sums[0] + sums[1] : sums[0];
}

// Row i against a tile, for the types with 32-value activation blocks: a
// float step per group.
void GroupSteps(const QuantRecord& rec, const uint8_t* tile, const QuantizedRows& x, int64_t i,
                float acc[kQuantTileRows]) {
  const int64_t k = x.k;
  for (int64_t g = 0; g < k / rec.group; ++g) {
    int32_t dot[kQuantTileRows];
    GroupDots(rec, tile, g, x.q.data() + i * k + g * rec.group, dot);
    const float dx = x.d[i * (k / kActBlock) + g * rec.group / kActBlock];
    const int32_t xsum = GroupSum(x, i, g, rec.group);
    for (int64_t r = 0; r < kQuantTileRows; ++r) {
      float a, b;
      GroupAffine(rec, tile, g, r, &a, &b);
      acc[r] = std::fma(static_cast<float>(dot[r]), a * dx, acc[r]);
      if (rec.has_b) acc[r] = std::fma(b, dx * static_cast<float>(xsum), acc[r]);
    }
  }
}

// Row i against a tile, for the K types: a superblock's groups add in
// integers, then one float step (two with offsets).
void SuperSteps(const QuantRecord& rec, const uint8_t* tile, const QuantizedRows& x, int64_t i,
                float acc[kQuantTileRows]) {
  const int64_t k = x.k;
  for (int64_t s = 0; s < k / kActSuperBlock; ++s) {
    int32_t ia[kQuantTileRows] = {}, ib[kQuantTileRows] = {};
    for (int64_t g = s * rec.groups_per_super; g < (s + 1) * rec.groups_per_super; ++g) {
      int32_t dot[kQuantTileRows];
      GroupDots(rec, tile, g, x.q.data() + i * k + g * rec.group, dot);
      const int32_t xsum = GroupSum(x, i, g, rec.group);
      const uint8_t* ints = QuantRecordAt(rec, tile, g) + rec.value_bytes;
      for (int64_t r = 0; r < kQuantTileRows; ++r) {
        ia[r] += static_cast<int8_t>(ints[r]) * dot[r];
        if (rec.has_b) ib[r] += static_cast<int8_t>(ints[kQuantTileRows + r]) * xsum;
      }
    }
    const float dx = x.d[i * (k / kActSuperBlock) + s];
    const uint8_t* header = QuantSuperAt(rec, tile, s);
    for (int64_t r = 0; r < kQuantTileRows; ++r) {
      uint16_t h[2] = {0, 0};
      std::memcpy(&h[0], header + 2 * r, 2);
      acc[r] = std::fma(static_cast<float>(ia[r]), HalfToFloat(h[0]) * dx, acc[r]);
      if (rec.has_b) {
        std::memcpy(&h[1], header + 2 * (kQuantTileRows + r), 2);
        acc[r] = std::fma(static_cast<float>(ib[r]), HalfToFloat(h[1]) * dx, acc[r]);
      }
    }
  }
}

}  // namespace

void QuantLinearPortable(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                         int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const uint8_t* tile = static_cast<const uint8_t*>(w.data) + t * QuantTileBytes(rec, w.cols);
    for (int64_t i = 0; i < x.n; ++i) {
      float acc[kQuantTileRows] = {};
      if (rec.per_group_ints) {
        SuperSteps(rec, tile, x, i, acc);
      } else {
        GroupSteps(rec, tile, x, i, acc);
      }
      for (int64_t r = 0; r < kQuantTileRows && t * kQuantTileRows + r < w.rows; ++r) {
        const int64_t j = t * kQuantTileRows + r;
        y[i * w.rows + j] = acc[r] + (bias ? bias[j] : 0.0f);
      }
    }
  }
}

}  // namespace tessera::cpu
