// GgufFile: opening (mmap or in-memory), lookup and typed getters with
// range-checked conversions; plus the ggml type helpers. Parsing lives in
// gguf_reader.cc, writing in gguf_writer.cc.
#include "engine/model/gguf.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/quant/quant.h"

namespace tessera {

size_t GgmlTypeSize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return 4;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 2;
    default:
      return 0;
  }
}

bool GgmlTypeIsQuantized(GgmlType type) {
  return quant::QuantTypeFromGgml(static_cast<uint32_t>(type)).has_value();
}

std::string_view GgmlTypeName(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return "F32";
    case GgmlType::kF16:
      return "F16";
    case GgmlType::kBF16:
      return "BF16";
    case GgmlType::kQ4_0:
      return "Q4_0";
    case GgmlType::kQ4_1:
      return "Q4_1";
    case GgmlType::kQ5_0:
      return "Q5_0";
    case GgmlType::kQ5_1:
      return "Q5_1";
    case GgmlType::kQ8_0:
      return "Q8_0";
    case GgmlType::kQ4_K:
      return "Q4_K";
    case GgmlType::kQ5_K:
      return "Q5_K";
    case GgmlType::kQ6_K:
      return "Q6_K";
    case GgmlType::kQ2_K:
      return "Q2_K";
    case GgmlType::kQ3_K:
      return "Q3_K";
    case GgmlType::kIQ4_NL:
      return "IQ4_NL";
    case GgmlType::kIQ4_XS:
      return "IQ4_XS";
  }
  return "unknown";
}

uint64_t GgmlElementCount(const std::vector<uint64_t>& dims) {
  uint64_t count = 1;
  for (uint64_t d : dims) count *= d;
  return count;
}

absl::StatusOr<uint64_t> GgmlTensorBytes(const std::vector<uint64_t>& dims, GgmlType type) {
  const std::optional<quant::QuantType> qt = quant::QuantTypeFromGgml(static_cast<uint32_t>(type));
  const uint64_t elem = GgmlTypeSize(type);
  if (elem == 0 && !qt) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported ggml type id ", static_cast<uint32_t>(type)));
  }
  if (dims.empty() || dims.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor has ", dims.size(), " dims (must be 1..4)"));
  }
  uint64_t count = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) return absl::InvalidArgumentError(absl::StrCat("dim ", i, " is zero"));
    if (__builtin_mul_overflow(count, dims[i], &count)) {
      return absl::InvalidArgumentError("element count (product of dims) overflows 64 bits");
    }
  }
  // ggml counts elements in int64_t, so stay below 2^63 as well.
  if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(count, " elements overflow 63 bits"));
  }
  if (qt) {
    const quant::QuantInfo& info = quant::Info(*qt);
    if (dims[0] % static_cast<uint64_t>(info.block_elems) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rows of ", dims[0], " elements are not whole ", std::string(GgmlTypeName(type)), " blocks of ",
          info.block_elems));
    }
    // count / block_elems blocks; their bytes stay below 2^63 · 210 / 256.
    return count / static_cast<uint64_t>(info.block_elems) * static_cast<uint64_t>(info.block_bytes);
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, elem, &bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size of ", count, " elements overflows 64 bits"));
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  auto mapped = MappedFile::Open(path, "a GGUF file");
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->mapped_ = std::move(*mapped);
  file->base_ = file->mapped_->data();
  file->size_ = file->mapped_->size();
  if (absl::Status s = file->Parse(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  for (GgufTensorInfo& t : file->tensors_) {
    t.source = {file->mapped_.get(), static_cast<uint64_t>(t.data - file->base_)};
  }
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBytes(std::vector<uint8_t> bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->owned_ = std::move(bytes);
  file->base_ = file->owned_.data();
  file->size_ = file->owned_.size();
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::FindValue(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// absl here is built with its own string_view type, which StrCat requires.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

absl::string_view ValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

std::string Describe(const GgufValue& v) {
  if (v.type != GgufValueType::kArray) return std::string(ValueTypeName(v.type));
  return absl::StrCat("array of ", ValueTypeName(v.array_type));
}

absl::Status WrongType(std::string_view key, const GgufValue& v, absl::string_view wanted) {
  return absl::InvalidArgumentError(
      absl::StrCat("metadata key '", Av(key), "' holds a ", Describe(v), ", not ", wanted));
}

absl::Status OutOfRange(std::string_view key, absl::string_view value, absl::string_view wanted) {
  return absl::InvalidArgumentError(
      absl::StrCat("metadata key '", Av(key), "' value ", value, " does not fit in ", wanted));
}

absl::Status NotFound(std::string_view key) {
  return absl::NotFoundError(absl::StrCat("metadata key '", Av(key), "' not found"));
}

}  // namespace

absl::StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return NotFound(key);
  if (const auto* u = std::get_if<uint64_t>(&v->value)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v->value)) {
    if (*i < 0) return OutOfRange(key, absl::StrCat(*i), "an unsigned integer");
    return static_cast<uint64_t>(*i);
  }
  return WrongType(key, *v, "an integer");
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return NotFound(key);
  if (const auto* i = std::get_if<int64_t>(&v->value)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v->value)) {
    if (*u > kInt64Max) return OutOfRange(key, absl::StrCat(*u), "int64");
    return static_cast<int64_t>(*u);
  }
  return WrongType(key, *v, "an integer");
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return NotFound(key);
  if (const auto* d = std::get_if<double>(&v->value)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v->value)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&v->value)) return static_cast<double>(*u);
  return WrongType(key, *v, "a number");
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return NotFound(key);
  if (const auto* b = std::get_if<bool>(&v->value)) return *b;
  return WrongType(key, *v, "a bool");
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return NotFound(key);
  if (const auto* s = std::get_if<std::string>(&v->value)) return *s;
  return WrongType(key, *v, "a string");
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return NotFound(key);
  if (const auto* s = std::get_if<std::vector<std::string>>(&v->value)) return *s;
  return WrongType(key, *v, "an array of strings");
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return NotFound(key);
  if (const auto* d = std::get_if<std::vector<double>>(&v->value)) return *d;
  if (const auto* i = std::get_if<std::vector<int64_t>>(&v->value)) {
    return std::vector<double>(i->begin(), i->end());
  }
  if (const auto* u = std::get_if<std::vector<uint64_t>>(&v->value)) {
    return std::vector<double>(u->begin(), u->end());
  }
  return WrongType(key, *v, "an array of numbers");
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return NotFound(key);
  if (const auto* i = std::get_if<std::vector<int64_t>>(&v->value)) return *i;
  if (const auto* u = std::get_if<std::vector<uint64_t>>(&v->value)) {
    std::vector<int64_t> out;
    out.reserve(u->size());
    for (size_t k = 0; k < u->size(); ++k) {
      if ((*u)[k] > kInt64Max) {
        return OutOfRange(key, absl::StrCat((*u)[k], " (element ", k, ")"), "int64");
      }
      out.push_back(static_cast<int64_t>((*u)[k]));
    }
    return out;
  }
  return WrongType(key, *v, "an array of integers");
}

absl::StatusOr<uint64_t> GgufFile::GetUintOr(std::string_view key, uint64_t fallback) const {
  if (FindValue(key) == nullptr) return fallback;
  return GetUint(key);
}

absl::StatusOr<double> GgufFile::GetFloatOr(std::string_view key, double fallback) const {
  if (FindValue(key) == nullptr) return fallback;
  return GetFloat(key);
}

absl::StatusOr<bool> GgufFile::GetBoolOr(std::string_view key, bool fallback) const {
  if (FindValue(key) == nullptr) return fallback;
  return GetBool(key);
}

absl::StatusOr<std::string> GgufFile::GetStringOr(std::string_view key,
                                                  std::string fallback) const {
  if (FindValue(key) == nullptr) return fallback;
  return GetString(key);
}

}  // namespace tessera
