#include "engine/backend/cpu/quant_linear.h"

#include <cmath>
#include <cstring>

#include "engine/util/thread_pool.h"

namespace tessera::cpu {

QuantRecord QuantRecordOf(DType dtype) {
  const quant::QuantType type = QuantTypeOf(dtype);
  const quant::AffineRow form = quant::AffineFormOf(type);
  QuantRecord r;
  r.group = form.group;
  r.signed_q = form.signed_q;
  r.nibbles = type == quant::QuantType::kQ4_0 || type == quant::QuantType::kQ4_1 ||
              type == quant::QuantType::kQ4_K;
  r.value_bytes = static_cast<int32_t>(kQuantTileRows) * r.group / (r.nibbles ? 2 : 1);
  r.bytes = r.value_bytes + 2 * static_cast<int32_t>(kQuantTileRows) * 4;
  return r;
}

size_t QuantPackedBytes(DType dtype, int64_t rows, int64_t cols) {
  const QuantRecord rec = QuantRecordOf(dtype);
  return static_cast<size_t>(NumQuantTiles(rows) * (cols / rec.group)) * rec.bytes;
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

void PackTile(const uint8_t* src, const Weight& dst, const QuantRecord& rec, int64_t t,
              std::vector<uint8_t>& q, std::vector<float>& a, std::vector<float>& b) {
  const int64_t groups = dst.cols / rec.group;
  const size_t row_bytes = DTypeRowBytes(dst.dtype, dst.cols);
  uint8_t* tile = static_cast<uint8_t*>(const_cast<void*>(dst.data)) + t * groups * rec.bytes;
  std::memset(tile, 0, static_cast<size_t>(groups * rec.bytes));
  for (int64_t r = 0; r < kQuantTileRows && t * kQuantTileRows + r < dst.rows; ++r) {
    quant::UnpackAffine(QuantTypeOf(dst.dtype), src + (t * kQuantTileRows + r) * row_bytes,
                        dst.cols, q.data(), a.data(), b.data());
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* record = tile + g * rec.bytes;
      for (int64_t c = 0; c < rec.group; ++c) {
        bool high = false;
        const int64_t off = ValueOffset(rec, r, c, &high);
        const uint8_t v = q[g * rec.group + c];
        record[off] |= high ? static_cast<uint8_t>(v << 4) : v;
      }
      float* scales = reinterpret_cast<float*>(record + rec.value_bytes);
      scales[r] = a[g];
      scales[kQuantTileRows + r] = b[g];
    }
  }
}

}  // namespace

void PackQuantWeight(const void* row_major, const Weight& dst, ThreadPool& pool) {
  const QuantRecord rec = QuantRecordOf(dst.dtype);
  const auto* src = static_cast<const uint8_t*>(row_major);
  pool.ParallelFor(NumQuantTiles(dst.rows), 1, [&](int64_t t0, int64_t t1) {
    std::vector<uint8_t> q(static_cast<size_t>(dst.cols));
    std::vector<float> a(static_cast<size_t>(dst.cols / rec.group)), b(a.size());
    for (int64_t t = t0; t < t1; ++t) PackTile(src, dst, rec, t, q, a, b);
  });
}

float QuantTileAt(const Weight& w, int64_t j, int64_t p) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  const int64_t groups = w.cols / rec.group, g = p / rec.group, r = j % kQuantTileRows;
  const uint8_t* record = static_cast<const uint8_t*>(w.data) +
                          ((j / kQuantTileRows) * groups + g) * rec.bytes;
  bool high = false;
  const uint8_t byte = record[ValueOffset(rec, r, p % rec.group, &high)];
  const int q = rec.nibbles ? (high ? byte >> 4 : byte & 0x0F)
                            : (rec.signed_q ? static_cast<int8_t>(byte) : byte);
  const float* scales = reinterpret_cast<const float*>(record + rec.value_bytes);
  return scales[r] * static_cast<float>(q) + scales[kQuantTileRows + r];
}

void PrepareQuantizedRows(int64_t n, int64_t k, QuantizedRows& out) {
  out.n = n, out.k = k;
  if (out.q.size() < static_cast<size_t>(n * k)) out.q.resize(static_cast<size_t>(n * k));
  if (out.d.size() < static_cast<size_t>(n * k / kActBlock)) {
    out.d.resize(static_cast<size_t>(n * k / kActBlock));
  }
  if (out.sums.size() < static_cast<size_t>(n * k / kActSumBlock)) {
    out.sums.resize(static_cast<size_t>(n * k / kActSumBlock));
  }
}

void QuantizeActivations(const float* x, int64_t begin, int64_t end, QuantizedRows& out) {
  const int64_t k = out.k;
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t blk = 0; blk < k / kActBlock; ++blk) {
      const float* v = x + i * k + blk * kActBlock;
      float amax = 0.0f;
      for (int64_t c = 0; c < kActBlock; ++c) amax = std::max(amax, std::fabs(v[c]));
      const float d = amax / 127.0f;
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
  }
}

void QuantLinearPortable(const QuantizedRows& x, const Weight& w, const float* bias, float* y,
                         int64_t tile_begin, int64_t tile_end) {
  const QuantRecord rec = QuantRecordOf(w.dtype);
  const int64_t k = w.cols, groups = k / rec.group;
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const uint8_t* tile = static_cast<const uint8_t*>(w.data) + t * groups * rec.bytes;
    for (int64_t i = 0; i < x.n; ++i) {
      float acc[kQuantTileRows] = {};
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* record = tile + g * rec.bytes;
        const float* scales = reinterpret_cast<const float*>(record + rec.value_bytes);
        const int8_t* xq = x.q.data() + i * k + g * rec.group;
        const int64_t first = g * rec.group;
        const float dx = x.d[i * (k / kActBlock) + first / kActBlock];
        int32_t xsum = x.sums[i * (k / kActSumBlock) + first / kActSumBlock];
        if (rec.group == 32) xsum += x.sums[i * (k / kActSumBlock) + first / kActSumBlock + 1];
        for (int64_t r = 0; r < kQuantTileRows; ++r) {
          int32_t dot = 0;
          for (int64_t c = 0; c < rec.group; ++c) {
            bool high = false;
            const uint8_t byte = record[ValueOffset(rec, r, c, &high)];
            const int q = rec.nibbles ? (high ? byte >> 4 : byte & 0x0F)
                                      : (rec.signed_q ? static_cast<int8_t>(byte) : byte);
            dot += q * xq[c];
          }
          acc[r] = std::fma(static_cast<float>(dot), scales[r] * dx, acc[r]);
          acc[r] = std::fma(scales[kQuantTileRows + r], dx * static_cast<float>(xsum), acc[r]);
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
