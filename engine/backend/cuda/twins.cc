#include "engine/backend/cuda/twins.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/backend/cuda/math.h"
#include "engine/model/float16.h"

namespace tessera::cuda::twin {

float Load(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case DType::kBF16:
      return Bf16ToFloat(static_cast<const uint16_t*>(data)[i]);
    default:  // f32 (quantized types are never activations)
      break;
  }
  return static_cast<const float*>(data)[i];
}

void Store(void* data, DType dtype, int64_t i, float x) {
  switch (dtype) {
    case DType::kF16:
      static_cast<uint16_t*>(data)[i] = FloatToHalf(x);
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(data)[i] = FloatToBf16(x);
      return;
    default:  // f32 (quantized types are never activations)
      static_cast<float*>(data)[i] = x;
      return;
  }
}

float Round(float x, DType dtype) {
  uint32_t bits = 0;
  Store(&bits, dtype, 0, x);
  return Load(&bits, dtype, 0);
}

void Embedding(const void* table, DType dtype, int64_t dim, const int32_t* ids, int32_t n,
               float* out) {
  for (int32_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < dim; ++c) out[i * dim + c] = Load(table, dtype, ids[i] * dim + c);
  }
}

void AddPositionEmbedding(float* x, const void* table, DType dtype, int64_t dim,
                          const int32_t* positions, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < dim; ++c) x[i * dim + c] += Load(table, dtype, positions[i] * dim + c);
  }
}

void RmsNorm(const float* x, const float* w, float eps, int32_t n, int64_t dim, float* out) {
  for (int32_t i = 0; i < n; ++i) {
    const float* xi = x + i * dim;
    double sum = 0;
    for (int64_t c = 0; c < dim; ++c) sum += double(xi[c]) * xi[c];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum / dim + eps));
    for (int64_t c = 0; c < dim; ++c) out[i * dim + c] = xi[c] * inv * w[c];
  }
}

void LayerNorm(const float* x, const float* w, const float* b, float eps, int32_t n, int64_t dim,
               float* out) {
  for (int32_t i = 0; i < n; ++i) {
    const float* xi = x + i * dim;
    double sum = 0, var = 0;
    for (int64_t c = 0; c < dim; ++c) sum += xi[c];
    const double mean = sum / dim;
    for (int64_t c = 0; c < dim; ++c) var += (xi[c] - mean) * (xi[c] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(var / dim + eps));
    for (int64_t c = 0; c < dim; ++c) {
      out[i * dim + c] = static_cast<float>(xi[c] - mean) * inv * w[c] + b[c];
    }
  }
}

void Rope(float* x, int32_t n, int32_t heads, int32_t head_dim, int32_t rot_dim, float base,
          const int32_t* positions) {
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t h = 0; h < heads; ++h) {
      for (int32_t p = 0; p < rot_dim / 2; ++p) {
        float cs, sn;
        RopeCosSin(positions[i], p, rot_dim, base, &cs, &sn);
        RopeRotate(x + (int64_t(i) * heads + h) * head_dim + 2 * p, cs, sn);
      }
    }
  }
}

void RopeExt(float* x, int32_t n, int32_t heads, int32_t head_dim, const RopeSpec& spec,
             const int32_t* positions) {
  const int32_t pairs = spec.rot_dim / 2;
  const bool neox = spec.style == RopeStyle::kNeox;
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t h = 0; h < heads; ++h) {
      for (int32_t p = 0; p < pairs; ++p) {
        float cs, sn;
        const float factor = spec.freq_factors ? spec.freq_factors[p] : 1.0f;
        RopeCosSinExt(positions[i], p, spec.rot_dim, spec.base, spec.freq_scale, factor, &cs, &sn,
                      spec.mscale);
        float* head = x + (int64_t(i) * heads + h) * head_dim;
        RopeRotateAt(head + (neox ? p : 2 * p), neox ? pairs : 1, cs, sn);
      }
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = SwiGluOf(gate[i], up[i]);
}

void GeGlu(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = GeGluOf(gate[i], up[i]);
}

void Scale(float* x, int64_t count, float s) {
  for (int64_t i = 0; i < count; ++i) x[i] *= s;
}

void Softcap(float* x, int64_t count, float cap) {
  for (int64_t i = 0; i < count; ++i) x[i] = SoftcapOf(x[i], cap, 1.0f / cap);
}

void Gelu(float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] = GeluTanhOf(x[i]);
}

void Add(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void AddBias(float* y, const float* bias, int32_t n, int64_t cols) {
  for (int32_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < cols; ++c) y[i * cols + c] += bias[c];
  }
}

void GatherRows(const float* src, int64_t cols, const int32_t* rows, int32_t n, float* dst) {
  for (int32_t i = 0; i < n; ++i) std::memcpy(dst + i * cols, src + rows[i] * cols, cols * 4);
}

void Linear(const float* x, int32_t n, const void* w, DType w_dtype, int64_t rows, int64_t cols,
            float* y) {
  for (int32_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) {
        sum += double(Round(x[i * cols + c], w_dtype)) * Load(w, w_dtype, r * cols + c);
      }
      y[i * rows + r] = static_cast<float>(sum);
    }
  }
}

void QuantLinear(const float* x, int32_t n, const void* w_blocks, DType dtype, int64_t rows,
                 int64_t cols, float* y) {
  const quant::QuantType type = QuantTypeOf(dtype);
  const int64_t row_bytes = quant::RowBytes(type, cols);
  std::vector<float> w(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    quant::DequantizeRow(type, static_cast<const uint8_t*>(w_blocks) + r * row_bytes, w.data(),
                         cols);
    for (int32_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += double(x[i * cols + c]) * w[c];
      y[i * rows + r] = static_cast<float>(sum);
    }
  }
}

namespace {

int64_t KvIndex(const KvLayer& c, int32_t block, int32_t g, int32_t o) {
  return ((int64_t(block) * c.kv_heads + g) * c.block_size + o) * c.head_dim;
}

// Key (or value) j of KV head g of a sequence whose table starts at `offset`.
int64_t KeyAt(const KvLayer& c, const AttentionPlan& plan, int32_t offset, int32_t g, int32_t j) {
  return KvIndex(c, plan.block_tables[offset + j / c.block_size], g, j % c.block_size);
}

}  // namespace

void KvAppend(const float* k, const float* v, const int32_t* slot_mapping, int32_t num_tokens,
              const KvLayer& c) {
  const int32_t row = c.kv_heads * c.head_dim;
  for (int32_t t = 0; t < num_tokens; ++t) {
    const int32_t block = slot_mapping[t] / c.block_size, o = slot_mapping[t] % c.block_size;
    for (int32_t e = 0; e < row; ++e) {
      const int64_t at = KvIndex(c, block, e / c.head_dim, o) + e % c.head_dim;
      Store(c.k, c.dtype, at, k[int64_t(t) * row + e]);
      Store(c.v, c.dtype, at, v[int64_t(t) * row + e]);
    }
  }
}

void DecodeAttention(const float* q, const KvLayer& c, const AttentionShape& shape,
                     const AttentionPlan& plan, float* out) {
  const int32_t d = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  for (const DecodeItem& item : plan.decode) {
    for (int32_t h = 0; h < shape.num_heads; ++h) {
      const float* qh = q + (int64_t(item.q_row) * shape.num_heads + h) * d;
      const int32_t splits = NumDecodeSplits(item.kv_len);
      std::vector<float> m(splits, -INFINITY), l(splits, 0.0f), acc(size_t(splits) * d, 0.0f);
      const int32_t first = FirstVisibleKey(item.kv_len - 1, shape.window);
      for (int32_t s = 0; s < splits; ++s) {
        const int32_t begin = s * kDecodeSplitKeys;
        const int32_t end = std::min(item.kv_len, begin + kDecodeSplitKeys);
        const int32_t lo = std::max(begin, first);
        std::vector<float> p(end - begin);
        for (int32_t j = lo; j < end; ++j) {
          const int64_t at = KeyAt(c, plan, item.table_offset, h / group, j);
          float dot = 0;
          for (int32_t i = 0; i < d; ++i) dot += qh[i] * Load(c.k, c.dtype, at + i);
          p[j - begin] = dot * shape.scale;
          m[s] = std::max(m[s], p[j - begin]);
        }
        for (int32_t j = lo; j < end; ++j) {
          p[j - begin] = std::exp(p[j - begin] - m[s]);
          l[s] += p[j - begin];
          const int64_t at = KeyAt(c, plan, item.table_offset, h / group, j);
          for (int32_t i = 0; i < d; ++i)
            acc[s * d + i] += p[j - begin] * Load(c.v, c.dtype, at + i);
        }
      }
      float gm = -INFINITY, gl = 0;
      for (int32_t s = 0; s < splits; ++s) gm = std::max(gm, m[s]);
      for (int32_t s = 0; s < splits; ++s) gl += l[s] * SplitWeight(m[s], gm);
      float* oh = out + (int64_t(item.q_row) * shape.num_heads + h) * d;
      for (int32_t i = 0; i < d; ++i) {
        float a = 0;
        for (int32_t s = 0; s < splits; ++s) a += acc[s * d + i] * SplitWeight(m[s], gm);
        oh[i] = gl > 0 ? a / gl : 0.0f;
      }
    }
  }
}

void PrefillAttention(const float* q, const KvLayer& c, const AttentionShape& shape,
                      const AttentionPlan& plan, float* out) {
  const int32_t d = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
  for (const PrefillItem& item : plan.prefill) {
    for (int32_t h = 0; h < shape.num_heads; ++h) {
      for (int32_t t = 0; t < item.rows; ++t) {
        const float* qh = q + (int64_t(item.q_row + t) * shape.num_heads + h) * d;
        const int32_t visible = item.first_pos + t + 1;
        const int32_t first = FirstVisibleKey(item.first_pos + t, shape.window);
        std::vector<float> s(visible);
        float m = -INFINITY;
        for (int32_t j = first; j < visible; ++j) {
          const int64_t at = KeyAt(c, plan, item.table_offset, h / group, j);
          double dot = 0;
          for (int32_t i = 0; i < d; ++i)
            dot += double(Round(qh[i], c.dtype)) * Load(c.k, c.dtype, at + i);
          s[j] = static_cast<float>(dot) * shape.scale;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (int32_t j = first; j < visible; ++j) sum += std::exp(s[j] - m);
        const float inv = static_cast<float>(1.0 / sum);
        float* oh = out + (int64_t(item.q_row + t) * shape.num_heads + h) * d;
        std::vector<double> acc(d, 0.0);
        for (int32_t j = first; j < visible; ++j) {
          const float p = Round(std::exp(s[j] - m) * inv, c.dtype);
          const int64_t at = KeyAt(c, plan, item.table_offset, h / group, j);
          for (int32_t i = 0; i < d; ++i) acc[i] += double(p) * Load(c.v, c.dtype, at + i);
        }
        for (int32_t i = 0; i < d; ++i) oh[i] = static_cast<float>(acc[i]);
      }
    }
  }
}

namespace {

float Scaled(const float* row, int32_t i, float inv_t) {
  return std::isnan(row[i]) ? -INFINITY : row[i] * inv_t;
}

int32_t ArgMax(const float* row, int32_t vocab, float inv_t) {
  float best = -INFINITY;
  int32_t id = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    if (Scaled(row, i, inv_t) > best) best = Scaled(row, i, inv_t), id = i;
  }
  return id;
}

int32_t SamplePlain(const float* row, int32_t vocab, float inv_t, float max, double uniform) {
  const int32_t chunk = (vocab + kSampleThreads - 1) / kSampleThreads;
  std::vector<double> local(kSampleThreads, 0.0), prefix(kSampleThreads, 0.0);
  int32_t last = 0;
  for (int32_t t = 0; t < kSampleThreads; ++t) {
    for (int32_t i = t * chunk; i < std::min(vocab, (t + 1) * chunk); ++i) {
      const float p = std::exp(Scaled(row, i, inv_t) - max);
      local[t] += p;
      if (p > 0.0f) last = i;
    }
  }
  double total = 0.0;
  for (int32_t t = 0; t < kSampleThreads; ++t) prefix[t] = total, total += local[t];
  const double target = uniform * total;
  for (int32_t t = 0; t < kSampleThreads; ++t) {
    if (!(prefix[t] <= target && prefix[t] + local[t] > target)) continue;
    double cum = 0.0;
    for (int32_t i = t * chunk; i < std::min(vocab, (t + 1) * chunk); ++i) {
      const float p = std::exp(Scaled(row, i, inv_t) - max);
      if (p <= 0.0f) continue;
      cum += p;
      if (prefix[t] + cum > target) return i;
    }
  }
  return last;
}

}  // namespace

int32_t Sample(const float* logits, int32_t vocab, const DeviceSamplingParams& p) {
  if (IsGreedy(p)) return ArgMax(logits, vocab, 1.0f);
  const float inv_t = 1.0f / p.temperature;
  float max = -INFINITY;
  for (int32_t i = 0; i < vocab; ++i) max = std::max(max, Scaled(logits, i, inv_t));
  if (!std::isfinite(max)) return ArgMax(logits, vocab, inv_t);
  if (!(p.top_k > 0 && p.top_k < vocab)) return SamplePlain(logits, vocab, inv_t, max, p.uniform);
  std::vector<std::pair<float, int32_t>> candidates;
  for (int32_t i = 0; i < vocab; ++i) {
    if (Scaled(logits, i, inv_t) > -INFINITY) candidates.emplace_back(Scaled(logits, i, inv_t), i);
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  candidates.resize(std::min<size_t>(candidates.size(), p.top_k));
  std::vector<float> vals;
  std::vector<int32_t> ids;
  for (const auto& [v, id] : candidates) vals.push_back(v), ids.push_back(id);
  return TruncatedDraw(vals.data(), ids.data(), static_cast<int32_t>(vals.size()), max, p);
}

}  // namespace tessera::cuda::twin
