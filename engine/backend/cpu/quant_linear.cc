#include "engine/backend/cpu/quant_linear.h"

#include <cmath>
#include <atomic>
#include <cstring>

#include "engine/model/float16.h"
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
  r.nibbles = type == quant::QuantType::kQ4_0 || type == quant::QuantType::kQ4_1 ||
              type == quant::QuantType::kQ4_K;
  constexpr int32_t kRows = static_cast<int32_t>(kQuantTileRows);
  r.value_bytes = kRows * r.group / (r.nibbles ? 2 : 1);
  r.bytes = r.value_bytes + (r.per_group_ints ? kRows * (r.has_b ? 2 : 1) : 0);
  r.header_bytes = kRows * 2 * (r.has_b ? 2 : 1);
  r.super_bytes = r.header_bytes + r.groups_per_super * r.bytes;
  return r;
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
  return rec.nibbles ? (high ? byte >> 4 : byte & 0x0F)
                     : (rec.signed_q ? static_cast<int8_t>(byte) : byte);
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

void PrepareQuantizedRows(int64_t n, int64_t k, QuantizedRows& out) {
  static std::atomic<uint64_t> generations{0};
  out.generation = ++generations;
  out.n = n, out.k = k;
  if (out.q.size() < static_cast<size_t>(n * k)) out.q.resize(static_cast<size_t>(n * k));
  if (out.d.size() < static_cast<size_t>(n * k / kActBlock)) {
    out.d.resize(static_cast<size_t>(n * k / kActBlock));
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
  const int64_t d_stride = x.k / kActBlock, sum_stride = x.k / kActSumBlock;
  const size_t size = static_cast<size_t>(groups * n + kRowStepsPad);
  if (steps.dx.size() < size) {
    steps.dx.resize(size), steps.dsum.resize(size), steps.xsum.resize(size);
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first = g * group;
      const float dx = x.d[i * d_stride + first / kActBlock];
      int32_t xsum = x.sums[i * sum_stride + first / kActSumBlock];
      if (group == 32) xsum += x.sums[i * sum_stride + first / kActSumBlock + 1];
      steps.dx[g * n + i] = dx;
      steps.xsum[g * n + i] = xsum;
      steps.dsum[g * n + i] = dx * static_cast<float>(xsum);
    }
  }
  steps.generation = x.generation, steps.group = group;
  return steps;
}

void InterleaveRow(QuantizedRows& out, int64_t i) {
  const int64_t quads = out.k / 4;
  int32_t* dst = out.quads.data() + (i / kQuadRows) * quads * kQuadRows + i % kQuadRows;
  const int8_t* src = out.q.data() + i * out.k;
  for (int64_t u = 0; u < quads; ++u) std::memcpy(dst + u * kQuadRows, src + 4 * u, 4);
}

void QuantizeActivations(const float* x, int64_t begin, int64_t end, QuantizedRows& out) {
  const int64_t k = out.k;
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t blk = 0; blk < k / kActBlock; ++blk) {
      const float* v = x + i * k + blk * kActBlock;
      float amax = 0.0f;
      for (int64_t c = 0; c < kActBlock; ++c) amax = std::max(amax, std::fabs(v[c]));
      // A block whose step is below the normal floats (|x| < 1.5e-36, or
      // NaN) is zero: 1/d would overflow.
      const float d = ActivationStep(amax);
      const float inv = d != 0.0f ? 1.0f / d : 0.0f;
      int8_t* q = out.q.data() + i * k + blk * kActBlock;
      int32_t sum[2] = {0, 0};
      for (int64_t c = 0; c < kActBlock; ++c) {
        q[c] = static_cast<int8_t>(std::nearbyint(v[c] * inv));
        sum[c / kActSumBlock] += q[c];
      }
      out.d[i * (k / kActBlock) + blk] = d;
      out.sums[i * (k / kActSumBlock) + 2 * blk] = sum[0];
      out.sums[i * (k / kActSumBlock) + 2 * blk + 1] = sum[1];
    }
    InterleaveRow(out, i);
  }
}

void QuantLinearPortable(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                         int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  const int64_t k = w.cols, groups = k / rec.group;
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const uint8_t* tile = static_cast<const uint8_t*>(w.data) + t * QuantTileBytes(rec, k);
    for (int64_t i = 0; i < x.n; ++i) {
      float acc[kQuantTileRows] = {};
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* record = QuantRecordAt(rec, tile, g);
        const int8_t* xq = x.q.data() + i * k + g * rec.group;
        const int64_t first = g * rec.group;
        const float dx = x.d[i * (k / kActBlock) + first / kActBlock];
        int32_t xsum = x.sums[i * (k / kActSumBlock) + first / kActSumBlock];
        if (rec.group == 32) xsum += x.sums[i * (k / kActSumBlock) + first / kActSumBlock + 1];
        for (int64_t r = 0; r < kQuantTileRows; ++r) {
          int32_t dot = 0;
          for (int64_t c = 0; c < rec.group; ++c) dot += ValueAt(rec, record, r, c) * xq[c];
          float a, b;
          GroupAffine(rec, tile, g, r, &a, &b);
          acc[r] = std::fma(static_cast<float>(dot), a * dx, acc[r]);
          if (rec.has_b) acc[r] = std::fma(b, dx * static_cast<float>(xsum), acc[r]);
        }
      }
      for (int64_t r = 0; r < kQuantTileRows && t * kQuantTileRows + r < w.rows; ++r) {
        const int64_t j = t * kQuantTileRows + r;
        y[i * w.rows + j] = acc[r] + (bias ? bias[j] : 0.0f);
      }
    }
  }
}

}  // namespace tessera::cpu
