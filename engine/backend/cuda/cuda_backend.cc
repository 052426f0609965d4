#include "engine/backend/cuda/cuda_backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/kernels.h"
#include "engine/backend/cuda/math.h"
#include "engine/backend/cuda/quant_gemv.h"
#include "engine/backend/cuda/twins.h"

namespace tessera::cuda {
namespace {

// Backend memory: device memory owned by a DeviceBuffer.
class CudaBuffer final : public Buffer {
 public:
  explicit CudaBuffer(DeviceBuffer memory) : memory_(std::move(memory)) {}
  void* data() override { return memory_.data(); }
  size_t size() const override { return memory_.size(); }

 private:
  DeviceBuffer memory_;
};

// Prefill items hold at most this many query rows (attention_plan.h), and
// fewer for long contexts, so that one item's scores and probabilities stay
// within kPrefillWorkspaceCap.
constexpr int32_t kMaxItemRows = 512;
constexpr size_t kPrefillWorkspaceCap = size_t{1} << 30;

int32_t ItemRows(const StepLimits& limits) {
  const size_t per_row = size_t(limits.attention.num_heads) *
                         (size_t(limits.max_context) + kKeyPad) * 2 * sizeof(float);
  const size_t fit = std::max<size_t>(16, kPrefillWorkspaceCap / per_row);
  return static_cast<int32_t>(
      std::min<size_t>({fit, size_t(kMaxItemRows), size_t(std::max(limits.max_tokens, 1))}));
}

// Copies host memory to the device on `stream` and waits for it. A plain
// cudaMemcpy would go on the legacy default stream, which the backend's
// non-blocking stream does not wait for, and for pageable memory it may
// return before the data has landed: a kernel could read a weight early.
absl::Status UploadToDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (auto s = CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream),
                          "uploading a weight");
      !s.ok()) {
    return s;
  }
  return CudaStatus(cudaStreamSynchronize(stream), "uploading a weight");
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions& o) {
  auto count = CountDevices();
  if (!count.ok()) return count.status();
  if (o.device < 0 || o.device >= *count) {
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA device ", o.device, " does not exist (", *count, " present)"));
  }
  if (auto s = CudaStatus(cudaSetDevice(o.device), "cudaSetDevice"); !s.ok()) return s;
  auto stream = Stream::Create();
  if (!stream.ok()) return stream.status();
  auto cublas = CublasHandle::Create(stream->get());
  if (!cublas.ok()) return cublas.status();
  auto slots = Event::Create();
  if (!slots.ok()) return slots.status();
  auto plan = Event::Create();
  if (!plan.ok()) return plan.status();
  return std::unique_ptr<CudaBackend>(new CudaBackend(o, std::move(*stream), std::move(*cublas),
                                                      std::move(*slots), std::move(*plan)));
}

CudaBackend::CudaBackend(const CudaBackendOptions& options, Stream stream, CublasHandle cublas,
                         Event slots_copied, Event plan_copied)
    : options_(options),
      stream_(std::move(stream)),
      cublas_(std::move(cublas)),
      slots_copied_(std::move(slots_copied)),
      plan_copied_(std::move(plan_copied)) {}

// Queued work may still use the buffers: finish it before members free them.
CudaBackend::~CudaBackend() { cudaStreamSynchronize(stream_.get()); }

bool CudaBackend::Record(absl::Status status) {
  if (error_.ok() && !status.ok()) error_ = std::move(status);
  return error_.ok();
}

absl::Status CudaBackend::ConsumeError() {
  converted_x_ = nullptr;
  return std::exchange(error_, absl::OkStatus());
}

// The float type of a weight on the device: under auto, f16 and bf16 stay
// and f32 becomes f16; else the chosen dtype. Quantized matrices of linear
// layers keep their GGUF blocks on the device (PrepareWeight; the decode
// GEMV reads them directly, quant_gemv.h), and this is the type prefill
// expands them to, tile by tile, for cuBLAS: f16 under auto. Quantized
// tables (embeddings) are dequantized to it at load.
DType CudaBackend::DeviceDtype(DType file_dtype) const {
  if (!options_.auto_dtype) return options_.dtype;
  return file_dtype == DType::kF32 || IsQuantized(file_dtype) ? DType::kF16 : file_dtype;
}

absl::Status CudaBackend::EnsureSize(DeviceBuffer& buffer, size_t bytes) {
  if (buffer.size() >= bytes) return absl::OkStatus();
  // Work queued on the old buffer must finish before it is freed.
  if (auto s = CudaStatus(cudaStreamSynchronize(stream()), "cudaStreamSynchronize"); !s.ok()) {
    return s;
  }
  auto grown = DeviceBuffer::Allocate(bytes);
  if (!grown.ok()) return grown.status();
  buffer = std::move(*grown);
  return absl::OkStatus();
}

absl::Status CudaBackend::ReserveWorkspace(const StepLimits& limits) {
  const AttentionShape& a = limits.attention;
  if (a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0 || a.head_dim > 256 ||
      limits.max_tokens <= 0 || limits.max_seqs <= 0 || limits.max_context <= 0) {
    return absl::InvalidArgumentError(
        "CUDA backend: attention needs heads divisible by kv heads and head_dim at most 256");
  }
  limits_ = limits;
  item_rows_ = ItemRows(limits);
  // Sized for an f32 KV cache, the larger of the two.
  const size_t prefill = PrefillWorkspaceBytes(a, sizeof(float), item_rows_, limits.max_context);
  const size_t partials = size_t(limits.max_seqs) * a.num_heads *
                          NumDecodeSplits(limits.max_context) * (a.head_dim + 2) * sizeof(float);
  if (auto s = EnsureSize(prefill_workspace_, prefill); !s.ok()) return s;
  if (auto s = EnsureSize(decode_partials_, partials); !s.ok()) return s;
  return absl::OkStatus();
}

int64_t CudaBackend::KvCacheBudgetBytes() const {
  size_t free = 0, total = 0;
  if (!CudaStatus(cudaMemGetInfo(&free, &total), "cudaMemGetInfo").ok()) return 0;
  return static_cast<int64_t>(static_cast<double>(free) * options_.gpu_memory_utilization);
}

absl::StatusOr<std::unique_ptr<Buffer>> CudaBackend::Allocate(size_t bytes) {
  converted_x_ = nullptr;  // a new buffer may reuse a freed one's address
  auto memory = DeviceBuffer::Allocate(bytes);
  if (!memory.ok()) return memory.status();
  // Linear inputs are activations from these buffers: a conversion buffer as
  // large as the largest of them (in 16-bit elements) serves every Linear.
  if (bytes > largest_buffer_) {
    largest_buffer_ = bytes;
    if (auto s = EnsureSize(convert_, bytes / 2); !s.ok()) return s;
  }
  return std::unique_ptr<Buffer>(std::make_unique<CudaBuffer>(std::move(*memory)));
}

namespace {

// Rows of a quantized weight that prefill expands at once: a tile of at
// most tile_bytes (at least one row), so that the scratch buffer stays
// small whatever the matrix (a whole output head of 128k rows would take
// 1 GiB in f16).
int64_t DequantTileRows(size_t tile_bytes, int64_t rows, int64_t cols, size_t elem_bytes) {
  const int64_t fit = static_cast<int64_t>(tile_bytes / (size_t(cols) * elem_bytes));
  return std::max<int64_t>(1, std::min(rows, fit));
}

// Dequantizes rows of blocks (the exact reference values) into `target`.
void ConvertQuantized(const void* host, DType dtype, int64_t rows, int64_t cols, DType target,
                      uint8_t* out) {
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t row_bytes = DTypeRowBytes(dtype, cols);
  for (int64_t r = 0; r < rows; ++r) {
    quant::DequantizeRow(QuantTypeOf(dtype), static_cast<const uint8_t*>(host) + r * row_bytes,
                         row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) twin::Store(out, target, r * cols + c, row[c]);
  }
}

// The weight in `target` (a float type), converted on the host.
std::vector<uint8_t> ConvertWeight(const void* host, DType dtype, int64_t rows, int64_t cols,
                                   DType target) {
  const size_t count = static_cast<size_t>(rows) * cols;
  std::vector<uint8_t> converted(count * DTypeSizeOf(target));
  if (IsQuantized(dtype)) {
    ConvertQuantized(host, dtype, rows, cols, target, converted.data());
  } else {
    for (size_t i = 0; i < count; ++i) {
      twin::Store(converted.data(), target, i, twin::Load(host, dtype, i));
    }
  }
  return converted;
}

}  // namespace

absl::StatusOr<Weight> CudaBackend::PrepareWeight(const void* host, DType dtype, int64_t rows,
                                                  int64_t cols, WeightUse use,
                                                  FileRange /*source*/) {
  // Quantized matrices of linear layers are uploaded as the file's blocks;
  // vectors (norm gains, biases) become f32, which the kernels read; every
  // other weight takes DeviceDtype.
  const bool blocks = IsQuantized(dtype) && use == WeightUse::kLinear && rows > 1;
  const DType target = blocks ? dtype : rows == 1 ? DType::kF32 : DeviceDtype(dtype);
  // A tied output head is the embedding table again: one device copy (a
  // quantized one is a second copy: blocks for the head, floats for lookups).
  for (const auto& [source_data, weight] : uploaded_) {
    if (source_data == host && weight.rows == rows && weight.cols == cols &&
        weight.dtype == target) {
      return weight;
    }
  }
  const size_t bytes = blocks ? size_t(rows) * quant::RowBytes(QuantTypeOf(dtype), cols)
                              : size_t(rows) * cols * DTypeSizeOf(target);
  if (blocks) {
    // Prefill's dequantization scratch, sized now so that steps allocate nothing.
    const size_t elem = DTypeSizeOf(DeviceDtype(dtype));
    const int64_t tile = DequantTileRows(options_.dequant_tile_bytes, rows, cols, elem);
    if (auto s = EnsureSize(dequant_, size_t(tile) * cols * elem); !s.ok()) return s;
  }
  auto memory = DeviceBuffer::Allocate(bytes);
  if (!memory.ok()) return memory.status();
  std::vector<uint8_t> converted;
  if (target != dtype) converted = ConvertWeight(host, dtype, rows, cols, target);
  const void* source = target != dtype ? converted.data() : host;
  if (auto s = UploadToDevice(memory->data(), source, bytes, stream()); !s.ok()) return s;
  weights_.push_back(std::move(*memory));
  const Weight weight{weights_.back().data(), target, rows, cols, WeightLayout::kRowMajor};
  uploaded_.emplace_back(host, weight);
  return weight;
}

absl::Status CudaBackend::AllocateKvCache(const KvStorageShape& shape) {
  if (shape.dtype == DType::kI8) {
    return absl::InvalidArgumentError("the int8 KV cache is CPU only; use f16 on CUDA");
  }
  if (shape.dtype != DType::kF32 && shape.dtype != DType::kF16 && shape.dtype != DType::kBF16) {
    return absl::InvalidArgumentError("unknown KV cache dtype");
  }
  const size_t bytes = size_t(shape.num_layers) * shape.num_blocks * shape.block_size *
                       shape.num_kv_heads * shape.head_dim * DTypeSizeOf(shape.dtype);
  k_cache_ = DeviceBuffer();
  v_cache_ = DeviceBuffer();
  auto k = DeviceBuffer::Allocate(bytes);
  if (!k.ok()) return k.status();
  auto v = DeviceBuffer::Allocate(bytes);
  if (!v.ok()) return v.status();
  k_cache_ = std::move(*k);
  v_cache_ = std::move(*v);
  kv_shape_ = shape;
  plan_stale_ = true;
  return absl::OkStatus();
}

void CudaBackend::CopyToHost(const float* src, float* dst, size_t count) {
  if (!Ok()) return;
  if (!Record(CudaStatus(
          cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost, stream()),
          "copying to the host"))) {
    return;
  }
  Record(CudaStatus(cudaStreamSynchronize(stream()), "cudaStreamSynchronize"));
}

void CudaBackend::CopyFromHost(const int32_t* src, int32_t* dst, size_t count) {
  if (!Begin() || count == 0) return;
  Record(CudaStatus(
      cudaMemcpyAsync(dst, src, count * sizeof(int32_t), cudaMemcpyHostToDevice, stream()),
      "copying from the host"));
}

void CudaBackend::Synchronize() {
  if (Ok()) Record(CudaStatus(cudaStreamSynchronize(stream()), "cudaStreamSynchronize"));
}

void CudaBackend::Embedding(const Weight& table, const int32_t* ids, int32_t n, float* out) {
  ForgetConversion();
  if (Begin()) Record(LaunchEmbedding(table.data, table.dtype, table.cols, ids, n, out, stream()));
}

void CudaBackend::RmsNorm(const float* x, const Weight& w, float eps, int32_t n, float* out) {
  ForgetConversion();
  if (Begin()) {
    Record(LaunchRmsNorm(x, static_cast<const float*>(w.data), eps, n, w.cols, out, stream()));
  }
}

void CudaBackend::LayerNorm(const float* x, const Weight& w, const Weight& b, float eps, int32_t n,
                            float* out) {
  ForgetConversion();
  if (Begin()) {
    Record(LaunchLayerNorm(x, static_cast<const float*>(w.data), static_cast<const float*>(b.data),
                           eps, n, w.cols, out, stream()));
  }
}

absl::StatusOr<const void*> CudaBackend::ConvertedInput(const float* x, int64_t count,
                                                        DType dtype) {
  if (dtype == DType::kF32) return static_cast<const void*>(x);
  // Q, K and V (and gate and up) read the same rows: convert them once.
  if (x != converted_x_ || count != converted_count_ || dtype != converted_dtype_) {
    converted_x_ = nullptr;
    if (auto s = EnsureSize(convert_, count * DTypeSizeOf(dtype)); !s.ok()) return s;
    if (auto s = LaunchConvert(x, count, dtype, convert_.data(), stream()); !s.ok()) return s;
    converted_x_ = x, converted_count_ = count, converted_dtype_ = dtype;
  }
  return static_cast<const void*>(convert_.data());
}

absl::Status CudaBackend::DenseLinear(const void* a, int32_t n, const void* w, DType dtype,
                                      int64_t rows, int64_t cols, int64_t ldc, float* y) {
  GemmOperands op;
  op.shape = RowMajorGemm{n, rows, cols, /*b_transposed=*/true, cols, cols, ldc};
  op.ab_dtype = dtype, op.a = a, op.b = w, op.c = y;
  return GemmRowMajor(cublas(), op);
}

absl::Status CudaBackend::QuantizedLinear(const float* x, int32_t n, const Weight& w, float* y) {
  if (n <= kQuantGemvMaxRows) {
    return LaunchQuantGemv(x, n, w.data, w.dtype, w.rows, w.cols, y, stream());
  }
  // Prefill: tiles of rows of W expanded into dequant_, each multiplied into
  // its columns of y (ldc = w.rows). The stream orders a tile's expansion
  // after the previous tile's GEMM, so one scratch tile serves them all.
  const DType t = DeviceDtype(w.dtype);
  auto a = ConvertedInput(x, int64_t(n) * w.cols, t);
  if (!a.ok()) return a.status();
  const int64_t tile =
      DequantTileRows(options_.dequant_tile_bytes, w.rows, w.cols, DTypeSizeOf(t));
  if (auto s = EnsureSize(dequant_, size_t(tile) * w.cols * DTypeSizeOf(t)); !s.ok()) return s;
  const size_t row_bytes = quant::RowBytes(QuantTypeOf(w.dtype), w.cols);
  for (int64_t r = 0; r < w.rows; r += tile) {
    const int64_t rows = std::min(tile, w.rows - r);
    const auto* first = static_cast<const uint8_t*>(w.data) + r * row_bytes;
    if (auto s = LaunchDequantize(first, w.dtype, rows, w.cols, t, dequant_.data(), stream());
        !s.ok()) {
      return s;
    }
    if (auto s = DenseLinear(*a, n, dequant_.data(), t, rows, w.cols, w.rows, y + r); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void CudaBackend::Linear(const float* x, int32_t n, const Weight& w, const Weight* bias, float* y) {
  if (!Ok() || n <= 0) return;
  if (IsQuantized(w.dtype)) {
    if (!Record(QuantizedLinear(x, n, w, y))) return;
  } else {
    auto a = ConvertedInput(x, int64_t(n) * w.cols, w.dtype);
    if (!Record(a.status())) return;
    if (!Record(DenseLinear(*a, n, w.data, w.dtype, w.rows, w.cols, w.rows, y))) return;
  }
  if (y == converted_x_) converted_x_ = nullptr;  // the rows just changed
  if (bias != nullptr && bias->data != nullptr) {
    Record(LaunchAddBias(y, static_cast<const float*>(bias->data), n, w.rows, stream()));
  }
}

void CudaBackend::RopeExt(float* x, int32_t n, int32_t heads, int32_t head_dim,
                          const RopeSpec& spec, const int32_t* positions) {
  ForgetConversion();
  if (Begin()) Record(LaunchRopeExt(x, n, heads, head_dim, spec, positions, stream()));
}

void CudaBackend::GeGlu(const float* gate, const float* up, int64_t count, float* out) {
  ForgetConversion();
  if (Begin()) Record(LaunchGeGlu(gate, up, count, out, stream()));
}

void CudaBackend::Scale(float* x, int64_t count, float s) {
  ForgetConversion();
  if (Begin()) Record(LaunchScale(x, count, s, stream()));
}

void CudaBackend::Softcap(float* x, int64_t count, float cap) {
  ForgetConversion();
  if (Begin()) Record(LaunchSoftcap(x, count, cap, stream()));
}

void CudaBackend::AddPositionEmbedding(float* x, const Weight& table, const int32_t* positions,
                                       int32_t n) {
  ForgetConversion();
  if (Begin()) {
    Record(
        LaunchAddPositionEmbedding(x, table.data, table.dtype, table.cols, positions, n, stream()));
  }
}

void CudaBackend::SwiGlu(const float* gate, const float* up, int64_t count, float* out) {
  ForgetConversion();
  if (Begin()) Record(LaunchSwiGlu(gate, up, count, out, stream()));
}

void CudaBackend::Gelu(float* x, int64_t count) {
  ForgetConversion();
  if (Begin()) Record(LaunchGelu(x, count, stream()));
}

void CudaBackend::Add(float* x, const float* y, int64_t count) {
  ForgetConversion();
  if (Begin()) Record(LaunchAdd(x, y, count, stream()));
}

void CudaBackend::GatherRows(const float* src, int64_t cols, const int32_t* rows, int32_t n,
                             float* dst) {
  ForgetConversion();
  if (Begin()) Record(LaunchGatherRows(src, cols, rows, n, dst, stream()));
}

}  // namespace tessera::cuda
