// The compute backend interface. The transformer's layer loop
// (engine/model/model.cc) is written once over these ops; the CPU backend and
// the CUDA backend implement them. Pointers passed to ops point into memory
// the backend allocated (host memory for the CPU, device memory for CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/quant/quant.h"
#include "engine/util/mapped_file.h"

namespace tessera {

// Element types of weights, activations and caches. The quantized types
// (weights only) follow in the order of quant::QuantType (QuantTypeOf,
// DTypeOf). kI8: the CPU KV cache's 8-bit type (int8 elements with an f32
// scale per token and KV head; see KvStorageShape), not a weight type.
enum class DType {
  kF32, kF16, kBF16, kI8,
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ4_K, kQ5_K, kQ6_K, kQ2_K, kQ3_K, kIQ4_NL, kIQ4_XS,
};
static_assert(static_cast<int>(DType::kIQ4_XS) - static_cast<int>(DType::kQ4_0) ==
              static_cast<int>(quant::QuantType::kIQ4_XS));

// Bytes per element of a float type (not of a quantized one: see DTypeRowBytes).
size_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);
// The KV cache type a name gives: "f32", "f16" or "int8" (DTypeName's names
// of the types a cache may hold); nullopt for any other name.
std::optional<DType> KvCacheDTypeFromName(std::string_view name);
inline bool IsQuantized(DType dtype) { return dtype >= DType::kQ4_0; }
// The block type of a quantized dtype.
inline quant::QuantType QuantTypeOf(DType dtype) {
  return static_cast<quant::QuantType>(static_cast<int>(dtype) - static_cast<int>(DType::kQ4_0));
}
inline DType DTypeOf(quant::QuantType type) {
  return static_cast<DType>(static_cast<int>(type) + static_cast<int>(DType::kQ4_0));
}
// Bytes of a row of `cols` elements (whole blocks for quantized types).
inline size_t DTypeRowBytes(DType dtype, int64_t cols) {
  return IsQuantized(dtype) ? static_cast<size_t>(quant::RowBytes(QuantTypeOf(dtype), cols))
                            : static_cast<size_t>(cols) * DTypeSize(dtype);
}

// How a weight is used, which decides how a backend lays it out.
enum class WeightUse {
  kLinear,  // the matrix of a linear layer, [out_features, in_features]
  kTable,   // rows looked up by index (embeddings), or a vector (norms, biases)
};

// How a backend laid a weight out in memory.
enum class WeightLayout {
  kRowMajor,  // as in the file
  kPanels,    // CPU: panels of 16 output rows (engine/backend/cpu/kernels.h)
  kAmx,       // CPU: bf16 tiles for AMX (engine/backend/cpu/kernels.h)
  kQuantTiles,  // CPU: quantized values in tiles of 8 rows (engine/backend/cpu/quant_linear.h)
};

// A weight as the backend stores it. Logically row-major [rows, cols]:
// rows = output features, cols = input features (GGUF dims {cols, rows});
// vectors (norm weights, biases) have rows = 1.
struct Weight {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  WeightLayout layout = WeightLayout::kRowMajor;
};

// Backend memory owned by RAII.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
  float* f32() { return static_cast<float*>(data()); }
};

// Per-sequence slice of a step's packed tokens, for attention.
struct AttentionSeq {
  int32_t q_start = 0;   // first row of this sequence in the packed token rows
  int32_t q_len = 0;     // new tokens this step
  int32_t kv_len = 0;    // tokens in the cache after this step (cached + new)
  const int32_t* block_table = nullptr;  // [ceil(kv_len / block_size)] block ids
};

// Typed per-step attention metadata (host memory; the backend copies what it
// needs to the device).
struct AttentionMetadata {
  std::vector<AttentionSeq> seqs;
  std::vector<int32_t> slot_mapping;  // [num_tokens]: block_id * block_size + offset
  int32_t num_tokens = 0;
  int32_t block_size = 16;
  int32_t max_q_len = 0;   // longest q_len, for padded prefill layouts
  int32_t max_kv_len = 0;  // longest kv_len
};

// Shapes of one model's attention, fixed at load time.
struct AttentionShape {
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;  // 1/sqrt(head_dim)
  // Sliding window: a query at position p sees keys at positions
  // (p - window, p] only (llama.cpp's standard SWA mask); 0 means no window.
  int32_t window = 0;
};

// How RoPE pairs the dims of a head: kAdjacent rotates (x[2i], x[2i+1])
// (llama.cpp's NORM), kNeox rotates (x[i], x[i + rot_dim/2]).
enum class RopeStyle { kAdjacent, kNeox };

// One RoPE: pair i of a token at position p turns by the angle
// p · freq_scale · base^(-2i/rot_dim) / freq_factors[i].
struct RopeSpec {
  int32_t rot_dim = 0;
  float base = 10000.0f;
  float freq_scale = 1.0f;
  RopeStyle style = RopeStyle::kAdjacent;
  const float* freq_factors = nullptr;  // [rot_dim / 2] in backend memory, or null (all 1)
  // cos and sin are multiplied by it, so q·k by its square (Phi-3 long-rope's
  // attention factor; llama.cpp's attn_factor).
  float mscale = 1.0f;
};

// The paged KV cache's storage: per layer, K and V for num_blocks blocks of
// block_size tokens × num_kv_heads × head_dim elements of `dtype` (the
// backend chooses the layout within a block). With kI8, each token's
// head_dim elements of a KV head also have an f32 scale: element = int8 ·
// scale.
struct KvStorageShape {
  int32_t num_layers = 0;
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::kF32;
  // One token's K (or V) vector of one KV head, with its scale for kI8.
  size_t BytesPerTokenHead() const;
  size_t BytesPerBlock() const;  // across all layers, K and V
};

// The largest step a caller will run, so that a backend can size its
// per-step workspaces once, before the first step (see ReserveWorkspace).
struct StepLimits {
  int32_t max_tokens = 0;   // packed tokens in one step
  int32_t max_seqs = 0;     // sequences in one step
  int32_t max_context = 0;  // longest kv_len of any sequence
  AttentionShape attention;
};

// One product of Backend::LinearMany: y[n, w.rows] = x · wᵀ (+ bias).
struct LinearOutput {
  const Weight* w = nullptr;
  const Weight* bias = nullptr;  // none when null or without data
  float* y = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // --- optional hooks (the CPU backend needs none of them) ---
  // Preallocates whatever a step up to `limits` needs, so that steps allocate
  // nothing. Called once after the weights, before AllocateKvCache.
  virtual absl::Status ReserveWorkspace(const StepLimits& limits) { return absl::OkStatus(); }
  // Bytes of memory the backend offers for the KV pool (for CUDA, a fraction
  // of the device's free memory); 0 means no opinion (the caller's default).
  virtual int64_t KvCacheBudgetBytes() const { return 0; }
  // Ops return nothing; a backend whose ops can fail (a device error)
  // records the first failure, skips later work, and hands it over here.
  virtual absl::Status ConsumeError() { return absl::OkStatus(); }

  // --- memory ---
  virtual absl::StatusOr<std::unique_ptr<Buffer>> Allocate(size_t bytes) = 0;
  // Makes a weight usable by the ops. `host` points at file data (GGUF
  // layout, which is row-major [rows, cols]). The CPU backend uses tables in
  // place; other weights are copied and kept as long as the backend. When
  // `source` names a file holding the same bytes, a backend may read them
  // from there instead of through `host` (see MappedFile).
  virtual absl::StatusOr<Weight> PrepareWeight(const void* host, DType dtype, int64_t rows,
                                               int64_t cols, WeightUse use,
                                               FileRange source = {}) = 0;
  // Allocates the KV cache storage.
  virtual absl::Status AllocateKvCache(const KvStorageShape& shape) = 0;
  // Copies rows of backend memory to the host (logits).
  virtual void CopyToHost(const float* src, float* dst, size_t count) = 0;
  virtual void CopyFromHost(const int32_t* src, int32_t* dst, size_t count) = 0;

  // --- ops; shapes in [rows, cols] ---
  // out[n, dim] = table[ids[i], :]
  virtual void Embedding(const Weight& table, const int32_t* ids, int32_t n, float* out) = 0;
  // out[n, dim] = x * rsqrt(mean(x^2) + eps) * w
  virtual void RmsNorm(const float* x, const Weight& w, float eps, int32_t n, float* out) = 0;
  // out[n, dim] = (x - mean) * rsqrt(var + eps) * w + b
  virtual void LayerNorm(const float* x, const Weight& w, const Weight& b, float eps, int32_t n,
                         float* out) = 0;
  // y[n, w.rows] = x[n, w.cols] · wᵀ (+ bias[w.rows] when bias.data)
  virtual void Linear(const float* x, int32_t n, const Weight& w, const Weight* bias,
                      float* y) = 0;
  // Linear for every output, all of the same input x[n, cols] (Q, K and V;
  // gate and up). A backend may convert x once and run the products as one
  // job; each output equals its own Linear call.
  virtual void LinearMany(const float* x, int32_t n, std::span<const LinearOutput> outputs) {
    for (const LinearOutput& o : outputs) Linear(x, n, *o.w, o.bias, o.y);
  }
  // Rotates adjacent pairs (x[2i], x[2i+1]) of the first rot_dim dims of each
  // head by position * base^(-2i/rot_dim). q: [n, heads, head_dim].
  void Rope(float* x, int32_t n, int32_t heads, int32_t head_dim, int32_t rot_dim, float base,
            const int32_t* positions) {
    RopeExt(x, n, heads, head_dim, RopeSpec{rot_dim, base}, positions);
  }
  // RoPE of any style, frequency scale and per-pair frequency factors (see
  // RopeSpec); dims past spec.rot_dim are left as they are.
  virtual void RopeExt(float* x, int32_t n, int32_t heads, int32_t head_dim, const RopeSpec& spec,
                       const int32_t* positions) = 0;
  // x[n, dim] += pos_table[positions[i], :]
  virtual void AddPositionEmbedding(float* x, const Weight& table, const int32_t* positions,
                                    int32_t n) = 0;
  // Writes k, v [num_tokens, kv_heads, head_dim] into the cache at slot_mapping.
  virtual void KvAppend(int32_t layer, const float* k, const float* v,
                        const AttentionMetadata& meta) = 0;
  // out[num_tokens, heads, head_dim] = softmax(q·Kᵀ·scale + causal/padding
  // mask, and the sliding-window mask when shape.window > 0)·V, with K and V
  // read from the cache (after KvAppend).
  virtual void Attention(int32_t layer, const float* q, const AttentionShape& shape,
                         const AttentionMetadata& meta, float* out) = 0;
  // out[n, ffn] = silu(gate) * up, where gate_up is [n, 2*ffn] laid out as
  // two separate arrays gate[n, ffn] and up[n, ffn].
  virtual void SwiGlu(const float* gate, const float* up, int64_t count, float* out) = 0;
  // out = gelu_tanh(gate) * up (Gemma's gated FFN).
  virtual void GeGlu(const float* gate, const float* up, int64_t count, float* out) = 0;
  // x = gelu_tanh(x), in place.
  virtual void Gelu(float* x, int64_t count) = 0;
  // x *= s, in place.
  virtual void Scale(float* x, int64_t count, float s) = 0;
  // x = cap * tanh(x / cap), in place (final logit soft-capping).
  virtual void Softcap(float* x, int64_t count, float cap) = 0;
  // x += y
  virtual void Add(float* x, const float* y, int64_t count) = 0;
  // dst[i, :] = src[rows[i], :] for row-gathering (LM head on sampled rows).
  virtual void GatherRows(const float* src, int64_t cols, const int32_t* rows, int32_t n,
                          float* dst) = 0;
  // Waits for queued work (no-op on the CPU).
  virtual void Synchronize() = 0;
};

struct BackendOptions {
  std::string_view device = "cpu";  // "cpu" | "cuda" | "auto"
  int32_t num_threads = 0;          // CPU threads; 0 = one per core
  // CPU matrix products: "f32" multiplies f32 (weights widened from their
  // type, exact products); "bf16" rounds weights and activations to bf16 and
  // uses AMX tiles, accumulating in f32 (needs AMX-BF16).
  std::string_view cpu_matmul = "f32";
  // CUDA: fraction of the free device memory (after the weights) that the
  // KV pool may take, in (0, 1].
  float gpu_memory_utilization = 0.9f;
  // CUDA: weight dtype on the device: "auto" (f16/bf16 stay, f32 becomes
  // f16), "f32" (exact, for parity runs), "f16" or "bf16".
  std::string_view dtype = "auto";
  // CUDA: path of the backend module; empty looks it up (see cuda_loader.h).
  std::string_view cuda_module = "";
};

// True when the CPU backend's kernel level runs bf16 matrix products
// (cpu_matmul bf16): AVX512-BF16 or AMX-BF16.
bool CpuHasBf16Matmul();

// Creates the backend for options.device. "auto" picks CUDA when its module
// loads and a GPU is present, else the CPU; "cuda" without a usable GPU is
// an error naming the cause.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

}  // namespace tessera
