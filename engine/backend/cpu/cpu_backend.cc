#include "engine/backend/cpu/cpu_backend.h"

#include <cmath>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <span>

#include "absl/strings/str_format.h"

namespace tessera::cpu {
namespace {

// Host memory aligned to a cache line or, when large, to 2 MiB and backed by
// transparent huge pages: weights and the KV cache are streamed every step,
// and 4 KiB pages would cost a TLB miss every few rows.
class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) {
    const size_t align = bytes >= kHugePage ? kHugePage : 64;
    size_ = std::max<size_t>(align, (bytes + align - 1) / align * align);
    data_ = std::aligned_alloc(align, size_);
    if (data_ != nullptr && align == kHugePage) madvise(data_, size_, MADV_HUGEPAGE);
  }
  ~HostBuffer() override { std::free(data_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() override { return data_; }
  size_t size() const override { return size_; }
  bool ok() const { return data_ != nullptr; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  size_t size_ = 0;
  void* data_ = nullptr;
};

// Minimum elements per thread before an elementwise op is split: below this
// the wake-up costs more than the work.
constexpr int64_t kMinElementsPerThread = 4096;

}  // namespace

CpuBackend::CpuBackend(int num_threads, bool use_bf16)
    : pool_(num_threads),
      linear_(SelectLinearKernel()),
      use_bf16_(use_bf16 && SelectBf16LinearKernel() != nullptr),
      bf16_linear_(SelectBf16LinearKernel()),
      quant_linear_(SelectQuantLinearKernel()),
      quantize_rows_(SelectQuantizeActivations()) {}

absl::StatusOr<std::unique_ptr<Buffer>> CpuBackend::Allocate(size_t bytes) {
  auto buffer = std::make_unique<HostBuffer>(bytes);
  if (!buffer->ok()) {
    return absl::ResourceExhaustedError(absl::StrFormat("cannot allocate %d bytes", bytes));
  }
  return std::unique_ptr<Buffer>(std::move(buffer));
}

absl::StatusOr<Weight> CpuBackend::PrepareWeight(const void* host, DType dtype, int64_t rows,
                                                 int64_t cols, WeightUse use, FileRange source) {
  if (use == WeightUse::kTable) return Weight{host, dtype, rows, cols, WeightLayout::kRowMajor};
  if (IsQuantized(dtype)) {
    auto buffer = Allocate(QuantPackedBytes(dtype, rows, cols));
    if (!buffer.ok()) return buffer.status();
    const Weight packed{(*buffer)->data(), dtype, rows, cols, WeightLayout::kQuantTiles};
    PackQuantWeight(host, packed, pool_);
    packed_weights_.push_back(std::move(*buffer));
    return packed;
  }
  if (use_bf16_) {
    auto buffer = Allocate(AmxPackedBytes(rows, cols));
    if (!buffer.ok()) return buffer.status();
    const Weight packed{(*buffer)->data(), DType::kBF16, rows, cols, WeightLayout::kAmx};
    PackWeightAmx(host, dtype, packed, pool_, source);
    packed_weights_.push_back(std::move(*buffer));
    return packed;
  }
  auto buffer = Allocate(PackedWeightBytes(dtype, rows, cols));
  if (!buffer.ok()) return buffer.status();
  const Weight packed{(*buffer)->data(), dtype, rows, cols, WeightLayout::kPanels};
  PackWeight(host, packed, pool_, source);
  packed_weights_.push_back(std::move(*buffer));
  return packed;
}

absl::Status CpuBackend::AllocateKvCache(const KvStorageShape& shape) {
  if (shape.dtype != DType::kF32 && shape.dtype != DType::kF16 && shape.dtype != DType::kI8) {
    return absl::InvalidArgumentError("the CPU KV cache holds f32, f16 or int8");
  }
  if (shape.dtype == DType::kI8 && shape.block_size * shape.head_dim % 4 != 0) {
    return absl::InvalidArgumentError(
        "the int8 KV cache needs block_size · head_dim to be a multiple of 4");
  }
  const size_t per_layer = static_cast<size_t>(shape.num_blocks) * shape.block_size *
                           shape.num_kv_heads * shape.BytesPerTokenHead();
  kv_shape_ = shape;
  kv_populator_ = PagePopulator();  // stops one still filling the old caches
  k_cache_.clear();
  v_cache_.clear();
  std::vector<std::span<std::byte>> ranges;
  for (int32_t l = 0; l < 2 * shape.num_layers; ++l) {
    auto buffer = Allocate(per_layer);
    if (!buffer.ok()) return buffer.status();
    ranges.emplace_back(static_cast<std::byte*>((*buffer)->data()), (*buffer)->size());
    (l % 2 == 0 ? k_cache_ : v_cache_).push_back(std::move(*buffer));
  }
  // Blocks are handed out over the server's first minutes; faulting their
  // pages in now keeps the kernel's page zeroing out of engine steps. It
  // waits while the pool runs jobs, so that it does not slow the first
  // requests down in turn: on a 2-core Zen 5 guest it takes 2.6 s of CPU
  // for 1 GiB, and a first 128-token prefill beside it took 654 ms, not 41
  // (the first request's TTFT right after startup: median 369 -> 134 ms).
  kv_populator_ = PagePopulator(std::move(ranges), [this, seen = pool_.jobs_started()]() mutable {
    const uint64_t now = pool_.jobs_started();
    const bool busy = now != seen;
    seen = now;
    return busy;
  });
  return absl::OkStatus();
}

// The logits of a step are megabytes; one core copies about half as fast as
// two.
void CpuBackend::CopyToHost(const float* src, float* dst, size_t count) {
  pool_.ParallelFor(static_cast<int64_t>(count), int64_t{1} << 16, [&](int64_t b, int64_t e) {
    std::memcpy(dst + b, src + b, (e - b) * sizeof(float));
  });
}

void CpuBackend::CopyFromHost(const int32_t* src, int32_t* dst, size_t count) {
  // An empty span may have no storage (null): memcpy must not see it.
  if (count == 0) return;
  std::memcpy(dst, src, count * sizeof(int32_t));
}

void CpuBackend::Embedding(const Weight& table, const int32_t* ids, int32_t n, float* out) {
  const int64_t dim = table.cols;
  if (IsQuantized(table.dtype)) {
    const size_t row_bytes = DTypeRowBytes(table.dtype, dim);
    for (int32_t i = 0; i < n; ++i) {
      quant::DequantizeRow(QuantTypeOf(table.dtype),
                           static_cast<const uint8_t*>(table.data) + ids[i] * row_bytes,
                           out + i * dim, dim);
    }
    return;
  }
  for (int32_t i = 0; i < n; ++i) {
    const int64_t base = static_cast<int64_t>(ids[i]) * dim;
    for (int64_t c = 0; c < dim; ++c) out[i * dim + c] = WeightAt(table, base + c);
  }
}

void CpuBackend::RmsNorm(const float* x, const Weight& w, float eps, int32_t n, float* out) {
  const int64_t dim = w.cols;
  pool_.ParallelFor(n, std::max<int64_t>(1, kMinElementsPerThread / dim), [&](int64_t b, int64_t e) {
    // Norm gains are f32 vectors (the loader checks), read directly.
    const float* gain = static_cast<const float*>(w.data);
    for (int64_t i = b; i < e; ++i) {
      const float* xi = x + i * dim;
      // Four partial sums in a fixed order: independent chains, same result
      // for a row whatever the batch.
      double part[4] = {0.0, 0.0, 0.0, 0.0};
      int64_t c = 0;
      for (; c + 4 <= dim; c += 4) {
        for (int u = 0; u < 4; ++u) part[u] += static_cast<double>(xi[c + u]) * xi[c + u];
      }
      for (; c < dim; ++c) part[0] += static_cast<double>(xi[c]) * xi[c];
      const double sum_sq = (part[0] + part[1]) + (part[2] + part[3]);
      const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
      float* oi = out + i * dim;
      for (c = 0; c < dim; ++c) oi[c] = xi[c] * inv * gain[c];
    }
  });
}

void CpuBackend::LayerNorm(const float* x, const Weight& w, const Weight& b, float eps, int32_t n,
                           float* out) {
  const int64_t dim = w.cols;
  pool_.ParallelFor(n, std::max<int64_t>(1, kMinElementsPerThread / dim), [&](int64_t rb, int64_t re) {
    for (int64_t i = rb; i < re; ++i) {
      const float* xi = x + i * dim;
      double sum = 0.0;
      for (int64_t c = 0; c < dim; ++c) sum += xi[c];
      const double mean = sum / dim;
      double var = 0.0;
      for (int64_t c = 0; c < dim; ++c) var += (xi[c] - mean) * (xi[c] - mean);
      const float inv = static_cast<float>(1.0 / std::sqrt(var / dim + eps));
      const float* gain = static_cast<const float*>(w.data);  // f32 vectors (loader checks)
      const float* shift = static_cast<const float*>(b.data);
      for (int64_t c = 0; c < dim; ++c) {
        out[i * dim + c] = static_cast<float>(xi[c] - mean) * inv * gain[c] + shift[c];
      }
    }
  });
}

namespace {

const float* BiasData(const Weight* bias) {
  return (bias && bias->data) ? static_cast<const float*>(bias->data) : nullptr;
}

// The most outputs one joint product takes (LinearQuant, LinearBf16).
constexpr size_t kMaxJointOutputs = 4;

// One parallel job over the units (tiles or panels, units_of(w) of weight
// w) of every output, in groups of `group` units numbered jointly: the
// groups of output i are [first[i], first[i + 1]). A chunk holds at least
// ~256K multiply-adds (macs_per_group each). run(i, u0, u1) computes units
// [u0, u1) of output i; one wait covers all the products.
template <typename UnitsOf, typename Run>
void JointProduct(ThreadPool& pool, std::span<const LinearOutput> outputs, int64_t group,
                  int64_t macs_per_group, UnitsOf units_of, Run run) {
  int64_t first[kMaxJointOutputs + 1] = {0}, units[kMaxJointOutputs] = {0};
  for (size_t i = 0; i < outputs.size(); ++i) {
    units[i] = units_of(*outputs[i].w);
    first[i + 1] = first[i] + (units[i] + group - 1) / group;
  }
  const int64_t min_groups = std::max<int64_t>(1, 262144 / std::max<int64_t>(1, macs_per_group));
  pool.ParallelFor(first[outputs.size()], min_groups, [&](int64_t b, int64_t e) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const int64_t lo = std::max(b, first[i]), hi = std::min(e, first[i + 1]);
      if (lo >= hi) continue;
      run(i, (lo - first[i]) * group, std::min(units[i], (hi - first[i]) * group));
    }
  });
}

}  // namespace

void CpuBackend::Linear(const float* x, int32_t n, const Weight& w, const Weight* bias, float* y) {
  if (w.layout == WeightLayout::kAmx) {
    const LinearOutput one{&w, bias, y};
    return LinearBf16(x, n, std::span<const LinearOutput>(&one, 1));
  }
  if (w.layout == WeightLayout::kQuantTiles) {
    const LinearOutput one{&w, bias, y};
    return LinearQuant(x, n, std::span<const LinearOutput>(&one, 1));
  }
  const float* bias_data = BiasData(bias);
  // Split by groups of four panels (the kernel's widest tile) of output
  // features; each chunk streams its own slice of the weights and should
  // hold at least ~64K multiply-adds.
  constexpr int64_t kGroup = 4;
  const int64_t panels = NumPanels(w.rows);
  const int64_t per_group = kGroup * kPanelRows * w.cols * std::max<int32_t>(1, n);
  const int64_t min_groups = std::max<int64_t>(1, 65536 / per_group);
  pool_.ParallelFor((panels + kGroup - 1) / kGroup, min_groups, [&](int64_t b, int64_t e) {
    linear_(x, n, w, bias_data, y, b * kGroup, std::min(panels, e * kGroup));
  });
}

void CpuBackend::LinearMany(const float* x, int32_t n, std::span<const LinearOutput> outputs) {
  bool amx = !outputs.empty(), quant = !outputs.empty();
  for (const LinearOutput& o : outputs) {
    amx = amx && o.w->layout == WeightLayout::kAmx && o.w->cols == outputs[0].w->cols;
    quant = quant && o.w->layout == WeightLayout::kQuantTiles && o.w->cols == outputs[0].w->cols;
    // One quantization of the rows serves outputs of one activation block.
    quant = quant && ActivationBlockOf(o.w->dtype) == ActivationBlockOf(outputs[0].w->dtype);
  }
  if (quant) return LinearQuant(x, n, outputs);
  if (!amx) return Backend::LinearMany(x, n, outputs);
  LinearBf16(x, n, outputs);
}

// Quantizes the rows once, then runs every output's groups of tiles as one
// parallel job.
void CpuBackend::LinearQuant(const float* x, int32_t n, std::span<const LinearOutput> outputs) {
  constexpr int64_t kGroup = kQuantTilesPerPass;  // tiles per chunk unit
  if (outputs.size() > kMaxJointOutputs) {
    for (const LinearOutput& o : outputs) LinearQuant(x, n, std::span<const LinearOutput>(&o, 1));
    return;
  }
  const int64_t cols = outputs[0].w->cols;
  PrepareQuantizedRows(n, cols, ActivationBlockOf(outputs[0].w->dtype), x_q8_);
  pool_.ParallelFor(n, std::max<int64_t>(1, 4 * kMinElementsPerThread / cols),
                    [&](int64_t b, int64_t e) { quantize_rows_(x, b, e, x_q8_); });
  JointProduct(
      pool_, outputs, kGroup, kGroup * kQuantTileRows * cols * std::max<int32_t>(1, n),
      [](const Weight& w) { return NumQuantTiles(w.rows); },
      [&](size_t i, int64_t t0, int64_t t1) {
        quant_linear_(x_q8_, *outputs[i].w, BiasData(outputs[i].bias), outputs[i].y, t0, t1);
      });
}

// Rounds the rows to bf16 once, then runs every output's groups of four
// panels as one parallel job: one wait for all the products.
void CpuBackend::LinearBf16(const float* x, int32_t n, std::span<const LinearOutput> outputs) {
  constexpr int64_t kGroup = 4;
  if (outputs.size() > kMaxJointOutputs) {
    for (const LinearOutput& o : outputs) LinearBf16(x, n, std::span<const LinearOutput>(&o, 1));
    return;
  }
  const int64_t cols = outputs[0].w->cols;
  const int64_t k_pad = AmxPaddedCols(cols);
  x_bf16_.resize(static_cast<size_t>(n) * k_pad);
  pool_.ParallelFor(n, std::max<int64_t>(1, 4 * kMinElementsPerThread / cols),
                    [&](int64_t b, int64_t e) {
    RowsToBf16Avx512(x + b * cols, e - b, cols, k_pad, x_bf16_.data() + b * k_pad);
  });
  JointProduct(
      pool_, outputs, kGroup, kGroup * kPanelRows * cols * std::max<int32_t>(1, n),
      [](const Weight& w) { return NumPanels(w.rows); },
      [&](size_t i, int64_t p0, int64_t p1) {
        bf16_linear_(x_bf16_.data(), k_pad, n, *outputs[i].w, BiasData(outputs[i].bias),
                     outputs[i].y, p0, p1);
      });
}

// Grows the table of mscale · (cos, sin) of pos · freq_scale ·
// base^(-2p/rot_dim) / freq_factors[p], computed in double, to cover positions [0, max_pos]. A
// table is kept per distinct rotation; every layer and step looks angles up.
const float* CpuBackend::RopeTable(const RopeSpec& spec, int32_t max_pos) {
  RopeTableEntry* entry = nullptr;
  for (RopeTableEntry& e : rope_tables_) {
    if (e.rot_dim == spec.rot_dim && e.base == spec.base && e.freq_scale == spec.freq_scale &&
        e.freq_factors == spec.freq_factors && e.mscale == spec.mscale) {
      entry = &e;
    }
  }
  if (entry == nullptr) {
    rope_tables_.push_back(
        {spec.rot_dim, spec.base, spec.freq_scale, spec.freq_factors, spec.mscale, {}});
    entry = &rope_tables_.back();
  }
  const int32_t pairs = spec.rot_dim / 2;
  std::vector<float>& table = entry->table;
  for (int64_t pos = static_cast<int64_t>(table.size()) / (2 * pairs); pos <= max_pos; ++pos) {
    for (int32_t p = 0; p < pairs; ++p) {
      const double factor = spec.freq_factors ? spec.freq_factors[p] : 1.0;
      const double theta = pos * static_cast<double>(spec.freq_scale) *
                           std::pow(static_cast<double>(spec.base), -2.0 * p / spec.rot_dim) /
                           factor;
      table.push_back(static_cast<float>(std::cos(theta) * spec.mscale));
      table.push_back(static_cast<float>(std::sin(theta) * spec.mscale));
    }
  }
  return table.data();
}

namespace {

// Rotates pair p of a head, (a[kStep · p], b[kStep · p]), by angles[2p]
// (cos) and angles[2p + 1] (sin). NEOX: kStep 1, b = a + rot_dim/2;
// adjacent pairs: kStep 2, b = a + 1. No element is reached through both
// pointers, so they may be __restrict and the loop vectorizes.
template <int kStep>
void RotatePairs(float* __restrict a, float* __restrict b, const float* angles, int32_t pairs) {
  for (int32_t p = 0; p < pairs; ++p) {
    const float cs = angles[2 * p], sn = angles[2 * p + 1];
    const float x0 = a[kStep * p], x1 = b[kStep * p];
    a[kStep * p] = x0 * cs - x1 * sn;
    b[kStep * p] = x0 * sn + x1 * cs;
  }
}

}  // namespace

void CpuBackend::RopeExt(float* x, int32_t n, int32_t heads, int32_t head_dim,
                         const RopeSpec& spec, const int32_t* positions) {
  int32_t max_pos = 0;
  for (int32_t i = 0; i < n; ++i) max_pos = std::max(max_pos, positions[i]);
  const float* table = RopeTable(spec, max_pos);
  const int32_t rot_dim = spec.rot_dim, half = rot_dim / 2;
  const int64_t per_token = int64_t{heads} * rot_dim;
  pool_.ParallelFor(n, std::max<int64_t>(1, kMinElementsPerThread / per_token),
                    [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* angles = table + int64_t{positions[i]} * rot_dim;  // [pairs][cos, sin]
      // Head by head, pairs innermost: contiguous, so the loops vectorize.
      for (int32_t h = 0; h < heads; ++h) {
        float* v = x + (i * heads + h) * head_dim;
        if (spec.style == RopeStyle::kNeox) {
          RotatePairs<1>(v, v + half, angles, half);
        } else {
          RotatePairs<2>(v, v + 1, angles, half);
        }
      }
    }
  });
}

void CpuBackend::AddPositionEmbedding(float* x, const Weight& table, const int32_t* positions,
                                      int32_t n) {
  const int64_t dim = table.cols;
  for (int32_t i = 0; i < n; ++i) {
    const int64_t base = static_cast<int64_t>(positions[i]) * dim;
    for (int64_t c = 0; c < dim; ++c) x[i * dim + c] += WeightAt(table, base + c);
  }
}

namespace {

// One (token, KV head) vector into the cache's type; returns its scale (1
// for float types).
inline float StoreKv(const float* src, float* dst, int32_t n) {
  std::memcpy(dst, src, n * sizeof(float));
  return 1.0f;
}
inline float StoreKv(const float* src, uint16_t* dst, int32_t n) {
  FloatsToHalves(src, dst, n);
  return 1.0f;
}
inline float StoreKv(const float* src, int8_t* dst, int32_t n) {
  return QuantizeKvInt8(src, n, dst);
}

}  // namespace

// Tokens are split across threads; each writes only its own slots. A
// head's part of a block (KvHeadElements) holds V as [bs, d] rows and K
// transposed, [d, bs]: dimension e of the token in slot o sits at e·bs + o;
// in the int8 cache, the bs scales follow (PagedKeys, PagedValues).
template <typename T>
void CpuBackend::KvAppendT(int32_t layer, const float* k, const float* v,
                           const AttentionMetadata& meta) {
  const int32_t bs = kv_shape_.block_size, d = kv_shape_.head_dim;
  const int32_t heads = kv_shape_.num_kv_heads;
  const int64_t head = KvHeadElements(), row = int64_t{heads} * d;
  T* k_base = static_cast<T*>(k_cache_[layer]->data());
  T* v_base = static_cast<T*>(v_cache_[layer]->data());
  pool_.ParallelFor(meta.num_tokens, std::max<int64_t>(1, kMinElementsPerThread / (2 * row)),
                    [&](int64_t begin, int64_t end) {
    // Local copies: int8 stores may alias anything reached through a
    // pointer (the closure too), which would reload the sizes at every byte
    // of the scatter below.
    const int64_t block_size = bs, dim = d;
    std::vector<T> k_row(d);
    for (int64_t i = begin; i < end; ++i) {
      const int32_t slot = meta.slot_mapping[i];
      const int32_t o = slot % bs;
      for (int32_t g = 0; g < heads; ++g) {
        T* vh = v_base + (int64_t{slot / bs} * heads + g) * head;
        T* kh = k_base + (int64_t{slot / bs} * heads + g) * head;
        const float v_scale = StoreKv(v + i * row + g * d, vh + int64_t{o} * d, d);
        const float k_scale = StoreKv(k + i * row + g * d, k_row.data(), d);
        const T* src = k_row.data();
        for (int64_t e = 0; e < dim; ++e) kh[e * block_size + o] = src[e];
        if constexpr (kScaledKv<T>) {
          std::memcpy(vh + int64_t{bs} * d + o * sizeof(float), &v_scale, sizeof(float));
          std::memcpy(kh + int64_t{bs} * d + o * sizeof(float), &k_scale, sizeof(float));
        }
      }
    }
  });
}

void CpuBackend::KvAppend(int32_t layer, const float* k, const float* v,
                          const AttentionMetadata& meta) {
  if (kv_shape_.dtype == DType::kF16) return KvAppendT<uint16_t>(layer, k, v, meta);
  if (kv_shape_.dtype == DType::kI8) return KvAppendT<int8_t>(layer, k, v, meta);
  KvAppendT<float>(layer, k, v, meta);
}

namespace {

inline float GeluTanh(float v) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
}

}  // namespace

void CpuBackend::SwiGlu(const float* gate, const float* up, int64_t count, float* out) {
  const CpuKernelPath path = SelectedKernelPath();
  pool_.ParallelFor(count, kMinElementsPerThread, [&](int64_t b, int64_t e) {
    if (path == CpuKernelPath::kAvx512) return SwiGluAvx512(gate + b, up + b, e - b, out + b);
    if (path == CpuKernelPath::kAvx2) return SwiGluAvx2(gate + b, up + b, e - b, out + b);
    for (int64_t i = b; i < e; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  });
}

void CpuBackend::Gelu(float* x, int64_t count) {
  const CpuKernelPath path = SelectedKernelPath();
  pool_.ParallelFor(count, kMinElementsPerThread, [&](int64_t b, int64_t e) {
    if (path == CpuKernelPath::kAvx512) return GeluAvx512(x + b, e - b);
    if (path == CpuKernelPath::kAvx2) return GeluAvx2(x + b, e - b);
    for (int64_t i = b; i < e; ++i) x[i] = GeluTanh(x[i]);
  });
}

void CpuBackend::GeGlu(const float* gate, const float* up, int64_t count, float* out) {
  const CpuKernelPath path = SelectedKernelPath();
  pool_.ParallelFor(count, kMinElementsPerThread, [&](int64_t b, int64_t e) {
    if (path == CpuKernelPath::kAvx512) return GeGluAvx512(gate + b, up + b, e - b, out + b);
    if (path == CpuKernelPath::kAvx2) return GeGluAvx2(gate + b, up + b, e - b, out + b);
    for (int64_t i = b; i < e; ++i) out[i] = GeluTanh(gate[i]) * up[i];
  });
}

void CpuBackend::Scale(float* x, int64_t count, float s) {
  pool_.ParallelFor(count, kMinElementsPerThread, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] *= s;
  });
}

void CpuBackend::Softcap(float* x, int64_t count, float cap) {
  const float inv = 1.0f / cap;
  pool_.ParallelFor(count, kMinElementsPerThread, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] = cap * std::tanh(x[i] * inv);
  });
}

void CpuBackend::Add(float* x, const float* y, int64_t count) {
  pool_.ParallelFor(count, kMinElementsPerThread, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] += y[i];
  });
}

void CpuBackend::GatherRows(const float* src, int64_t cols, const int32_t* rows, int32_t n,
                            float* dst) {
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * cols, src + static_cast<int64_t>(rows[i]) * cols, cols * sizeof(float));
  }
}

}  // namespace tessera::cpu
