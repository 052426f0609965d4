// GGUF v2/v3 reader (memory-mapped) with strict validation.
//
// Every count, length, offset, shape and type read from the file is checked
// with overflow-checked arithmetic; malformed files produce an absl::Status,
// never an assert or an out-of-bounds read.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/util/mapped_file.h"

namespace tessera {

// Metadata value types, numbered as in the GGUF specification.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Tensor element types, numbered as ggml numbers them: the float types and
// the quantized types of engine/quant/quant.h. Any other type id is rejected
// at load time with a message naming it.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};

// Bytes per element of a float tensor type; 0 for the quantized types,
// whose sizes come in blocks (engine/quant/quant.h).
size_t GgmlTypeSize(GgmlType type);
bool GgmlTypeIsQuantized(GgmlType type);
std::string_view GgmlTypeName(GgmlType type);
// Bytes of a tensor with these dims (ggml order) and type; INVALID_ARGUMENT
// for 0 or more than 4 dims, a zero dim, a count/size that overflows, or a
// quantized tensor whose rows (dims[0]) are not whole blocks.
absl::StatusOr<uint64_t> GgmlTensorBytes(const std::vector<uint64_t>& dims, GgmlType type);
// Product of the dims (valid dims, as GgmlTensorBytes accepts them).
uint64_t GgmlElementCount(const std::vector<uint64_t>& dims);

// One metadata value. Scalars of every integer width are widened to
// int64/uint64 so that typed getters can range-check them. Arrays hold the
// element type and one vector matching it.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType array_type = GgufValueType::kUint8;  // valid when type == kArray
  std::variant<std::monostate, uint64_t, int64_t, double, bool, std::string,
               std::vector<int64_t>, std::vector<uint64_t>, std::vector<double>,
               std::vector<std::string>, std::vector<bool>>
      value;
};

struct GgufTensorInfo {
  std::string name;
  // Dimensions in ggml order: dims[0] is the fastest-varying (contiguous) one.
  // A 2-D weight of PyTorch shape [out, in] has dims = {in, out}.
  std::vector<uint64_t> dims;
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;       // relative to the start of the data section
  uint64_t num_elements = 0;
  uint64_t num_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping; valid while the file lives
  FileRange source;               // the same bytes in the mapped file, when they are there
};

class GgufFile {
 public:
  // Maps and validates a file. The returned object owns the mapping.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses an in-memory image (used by tests and by the writer's self-check).
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBytes(std::vector<uint8_t> bytes);
  // Builds a file from parts whose tensor bytes live elsewhere (a model
  // folder's mapped safetensors, converted buffers): each tensor's `data`
  // must point at GgmlTensorBytes(dims, type) bytes kept alive by
  // `keep_alive`, which the file holds. num_elements, num_bytes and offset
  // are recomputed; names must be non-empty and unique, dims valid.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromParts(
      std::map<std::string, GgufValue, std::less<>> metadata, std::vector<GgufTensorInfo> tensors,
      std::vector<std::shared_ptr<const void>> keep_alive);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* FindValue(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // Typed getters. NOT_FOUND when the key is absent, INVALID_ARGUMENT when the
  // stored type cannot represent the requested one (e.g. a negative int as
  // uint32, or a string as a number).
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;  // any numeric type
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;  // any numeric
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;   // any integer

  // Getters with a default for absent keys; a present key of the wrong type
  // is still an error.
  absl::StatusOr<uint64_t> GetUintOr(std::string_view key, uint64_t fallback) const;
  absl::StatusOr<double> GetFloatOr(std::string_view key, double fallback) const;
  absl::StatusOr<bool> GetBoolOr(std::string_view key, bool fallback) const;
  absl::StatusOr<std::string> GetStringOr(std::string_view key, std::string fallback) const;

 private:
  GgufFile() = default;
  absl::Status Parse();

  // Exactly one of these holds the bytes.
  std::vector<uint8_t> owned_;
  std::unique_ptr<MappedFile> mapped_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::vector<std::shared_ptr<const void>> keep_alive_;  // FromParts: owners of tensor bytes

  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 image in memory. Used by tessera-make-model and by tests
// that need well-formed (or deliberately corrupted) files.
//
// Set* replaces an existing key of the same name; AddTensor* always appends.
// Serialize writes exactly what it was given (duplicate tensor names, data of
// the wrong size, a hand-set general.alignment), so tests can build corrupt
// images; WriteFile first runs Validate and refuses inconsistent input.
class GgufWriter {
 public:
  // Fills out[0, size) with a tensor's bytes when the file is written, so a
  // large model never has to be held in memory at once.
  using TensorProducer = std::function<absl::Status(uint8_t* out, size_t size)>;

  void SetUint32(const std::string& key, uint32_t v);
  void SetInt32(const std::string& key, int32_t v);
  void SetUint64(const std::string& key, uint64_t v);
  void SetFloat32(const std::string& key, float v);
  void SetBool(const std::string& key, bool v);
  void SetString(const std::string& key, const std::string& v);
  void SetStringArray(const std::string& key, const std::vector<std::string>& v);
  void SetFloat32Array(const std::string& key, const std::vector<float>& v);
  void SetInt32Array(const std::string& key, const std::vector<int32_t>& v);
  // Copies a metadata value verbatim from another file (used to copy a vocab).
  void SetValue(const std::string& key, const GgufValue& v);

  // dims in ggml order (fastest first). `data` must hold num_elements *
  // GgmlTypeSize(type) bytes.
  void AddTensor(const std::string& name, std::vector<uint64_t> dims, GgmlType type,
                 std::vector<uint8_t> data);
  // Like AddTensor, but the bytes (GgmlTensorBytes(dims, type) of them) come
  // from `produce`, called once per Serialize/WriteFile in tensor order.
  void AddTensorStreamed(const std::string& name, std::vector<uint64_t> dims, GgmlType type,
                         TensorProducer produce);

  // Checks that the file would be well-formed: alignment a nonzero power of
  // two, keys/names non-empty, at most 65535 bytes and unique, values
  // consistent with their types, dims valid and data sizes matching them.
  absl::Status Validate(uint64_t alignment = 32) const;

  // A producer that fails leaves its tensor zero-filled here; use WriteFile
  // to see such errors.
  std::vector<uint8_t> Serialize(uint64_t alignment = 32) const;
  // Streams the file to `path` (via a temporary file renamed into place).
  absl::Status WriteFile(const std::string& path, uint64_t alignment = 32) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    GgmlType type;
    std::vector<uint8_t> data;
    TensorProducer produce;  // set for streamed tensors; `data` is empty then
  };
  using ByteSink = std::function<absl::Status(const uint8_t* bytes, size_t size)>;
  void Upsert(const std::string& key, GgufValue value);
  uint64_t LayoutSize(const Tensor& t) const;
  std::vector<uint8_t> EncodeHeader(uint64_t alignment) const;
  absl::Status Emit(uint64_t alignment, const ByteSink& sink) const;

  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace tessera
