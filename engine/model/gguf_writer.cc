// GgufWriter: serializes metadata and tensors as GGUF v3.
//
// Layout: header, kv pairs, tensor infos, zero padding up to the alignment,
// then each tensor's bytes at its aligned offset. Nothing follows the last
// tensor, so every strict prefix of a written file is invalid.
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/model/gguf.h"

namespace tessera {
namespace {

constexpr uint64_t kMaxNameLength = 65535;
constexpr char kAlignmentKey[] = "general.alignment";

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  out->insert(out->end(), raw, raw + sizeof(T));
}

void PutString(std::vector<uint8_t>* out, absl::string_view s) {
  Put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

// Writes one number or bool as type t, narrowing from its widened storage.
// Validate rejects values that would not survive the narrowing.
template <typename V>
void PutElement(std::vector<uint8_t>* out, GgufValueType t, V v) {
  switch (t) {
    case GgufValueType::kUint8:
      return Put(out, static_cast<uint8_t>(v));
    case GgufValueType::kInt8:
      return Put(out, static_cast<int8_t>(v));
    case GgufValueType::kUint16:
      return Put(out, static_cast<uint16_t>(v));
    case GgufValueType::kInt16:
      return Put(out, static_cast<int16_t>(v));
    case GgufValueType::kUint32:
      return Put(out, static_cast<uint32_t>(v));
    case GgufValueType::kInt32:
      return Put(out, static_cast<int32_t>(v));
    case GgufValueType::kFloat32:
      return Put(out, static_cast<float>(v));
    case GgufValueType::kBool:
      return Put<uint8_t>(out, v ? 1 : 0);
    case GgufValueType::kUint64:
      return Put(out, static_cast<uint64_t>(v));
    case GgufValueType::kInt64:
      return Put(out, static_cast<int64_t>(v));
    case GgufValueType::kFloat64:
      return Put(out, static_cast<double>(v));
    default:
      return;  // string/array: inconsistent value, reported by Validate
  }
}

void PutValue(std::vector<uint8_t>* out, const GgufValue& v) {
  Put<uint32_t>(out, static_cast<uint32_t>(v.type));
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, std::monostate>) {
          // Nothing to write; Validate reports it.
        } else if constexpr (std::is_same_v<X, std::string>) {
          PutString(out, x);
        } else if constexpr (std::is_arithmetic_v<X>) {
          PutElement(out, v.type, x);
        } else {
          Put<uint32_t>(out, static_cast<uint32_t>(v.array_type));
          Put<uint64_t>(out, x.size());
          for (const auto& e : x) {
            if constexpr (std::is_same_v<std::decay_t<decltype(e)>, std::string>) {
              PutString(out, e);
            } else {
              PutElement(out, v.array_type, static_cast<typename X::value_type>(e));
            }
          }
        }
      },
      v.value);
}

uint64_t PadTo(uint64_t pos, uint64_t alignment) {
  const uint64_t a = alignment == 0 ? 1 : alignment;
  return (a - pos % a) % a;
}

GgufValue Scalar(GgufValueType type, decltype(GgufValue::value) value) {
  GgufValue v;
  v.type = type;
  v.value = std::move(value);
  return v;
}

template <typename T, typename Src>
GgufValue Array(GgufValueType elem, const std::vector<Src>& src) {
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.array_type = elem;
  v.value = std::vector<T>(src.begin(), src.end());
  return v;
}

// Index of the GgufValue::value alternative that holds a scalar of type t
// (as_array=false) or an array of elements of type t; -1 for none.
int ExpectedAlternative(GgufValueType t, bool as_array) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
      return as_array ? 7 : 1;
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return as_array ? 6 : 2;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return as_array ? 8 : 3;
    case GgufValueType::kBool:
      return as_array ? 10 : 4;
    case GgufValueType::kString:
      return as_array ? 9 : 5;
    default:
      return -1;
  }
}

bool Fits(GgufValueType t, uint64_t u) {
  switch (t) {
    case GgufValueType::kUint8:
      return u <= std::numeric_limits<uint8_t>::max();
    case GgufValueType::kUint16:
      return u <= std::numeric_limits<uint16_t>::max();
    case GgufValueType::kUint32:
      return u <= std::numeric_limits<uint32_t>::max();
    default:
      return true;
  }
}

bool Fits(GgufValueType t, int64_t i) {
  switch (t) {
    case GgufValueType::kInt8:
      return i >= std::numeric_limits<int8_t>::min() && i <= std::numeric_limits<int8_t>::max();
    case GgufValueType::kInt16:
      return i >= std::numeric_limits<int16_t>::min() && i <= std::numeric_limits<int16_t>::max();
    case GgufValueType::kInt32:
      return i >= std::numeric_limits<int32_t>::min() && i <= std::numeric_limits<int32_t>::max();
    default:
      return true;
  }
}

template <typename T>
bool AllFit(GgufValueType t, const std::vector<T>& values) {
  for (T v : values) {
    if (!Fits(t, v)) return false;
  }
  return true;
}

absl::Status CheckValue(const std::string& key, const GgufValue& v) {
  const bool is_array = v.type == GgufValueType::kArray;
  const GgufValueType elem = is_array ? v.array_type : v.type;
  const int expected = ExpectedAlternative(elem, is_array);
  if (expected < 0 || static_cast<int>(v.value.index()) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key '", key, "': value of type ", static_cast<uint32_t>(v.type),
                     is_array ? absl::StrCat(" (elements ", static_cast<uint32_t>(elem), ")") : "",
                     " does not match the stored value"));
  }
  bool fits = true;
  if (const auto* u = std::get_if<uint64_t>(&v.value)) fits = Fits(elem, *u);
  if (const auto* i = std::get_if<int64_t>(&v.value)) fits = Fits(elem, *i);
  if (const auto* us = std::get_if<std::vector<uint64_t>>(&v.value)) fits = AllFit(elem, *us);
  if (const auto* is = std::get_if<std::vector<int64_t>>(&v.value)) fits = AllFit(elem, *is);
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", key, "': value out of range for type ", static_cast<uint32_t>(elem)));
  }
  return absl::OkStatus();
}

absl::Status CheckName(absl::string_view what, const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name.substr(0, 64), "' has length ",
                                                   name.size(), " (must be 1..65535)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GgufWriter::Validate(uint64_t alignment) const {
  if (alignment == 0 || !std::has_single_bit(alignment) ||
      alignment > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment ", alignment, " is not a power of two that fits in uint32"));
  }
  std::set<absl::string_view> seen;
  for (const auto& [key, value] : kv_) {
    if (absl::Status s = CheckName("metadata key", key); !s.ok()) return s;
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate metadata key '", key, "'"));
    }
    if (absl::Status s = CheckValue(key, value); !s.ok()) return s;
    if (key == kAlignmentKey &&
        (value.type != GgufValueType::kUint32 || value.value != decltype(value.value)(alignment))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata key 'general.alignment' must be a uint32 equal to the alignment ", alignment));
    }
  }
  seen.clear();
  for (const Tensor& t : tensors_) {
    if (absl::Status s = CheckName("tensor name", t.name); !s.ok()) return s;
    if (!seen.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name '", t.name, "'"));
    }
    absl::StatusOr<uint64_t> bytes = GgmlTensorBytes(t.dims, t.type);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "': ", bytes.status().message()));
    }
    if (!t.produce && t.data.size() != *bytes) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has ", t.data.size(),
                                                     " bytes of data, expected ", *bytes));
    }
  }
  return absl::OkStatus();
}

void GgufWriter::Upsert(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::SetUint32(const std::string& key, uint32_t v) {
  Upsert(key, Scalar(GgufValueType::kUint32, uint64_t{v}));
}
void GgufWriter::SetInt32(const std::string& key, int32_t v) {
  Upsert(key, Scalar(GgufValueType::kInt32, int64_t{v}));
}
void GgufWriter::SetUint64(const std::string& key, uint64_t v) {
  Upsert(key, Scalar(GgufValueType::kUint64, v));
}
void GgufWriter::SetFloat32(const std::string& key, float v) {
  Upsert(key, Scalar(GgufValueType::kFloat32, double{v}));
}
void GgufWriter::SetBool(const std::string& key, bool v) {
  Upsert(key, Scalar(GgufValueType::kBool, v));
}
void GgufWriter::SetString(const std::string& key, const std::string& v) {
  Upsert(key, Scalar(GgufValueType::kString, v));
}
void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& v) {
  Upsert(key, Array<std::string>(GgufValueType::kString, v));
}
void GgufWriter::SetFloat32Array(const std::string& key, const std::vector<float>& v) {
  Upsert(key, Array<double>(GgufValueType::kFloat32, v));
}
void GgufWriter::SetInt32Array(const std::string& key, const std::vector<int32_t>& v) {
  Upsert(key, Array<int64_t>(GgufValueType::kInt32, v));
}
void GgufWriter::SetValue(const std::string& key, const GgufValue& v) { Upsert(key, v); }

void GgufWriter::AddTensor(const std::string& name, std::vector<uint64_t> dims, GgmlType type,
                           std::vector<uint8_t> data) {
  tensors_.push_back(Tensor{name, std::move(dims), type, std::move(data), nullptr});
}

void GgufWriter::AddTensorStreamed(const std::string& name, std::vector<uint64_t> dims,
                                   GgmlType type, TensorProducer produce) {
  tensors_.push_back(Tensor{name, std::move(dims), type, {}, std::move(produce)});
}

uint64_t GgufWriter::LayoutSize(const Tensor& t) const {
  if (!t.produce) return t.data.size();
  return GgmlTensorBytes(t.dims, t.type).value_or(0);
}

std::vector<uint8_t> GgufWriter::EncodeHeader(uint64_t alignment) const {
  bool has_alignment_key = false;
  for (const auto& kv : kv_) has_alignment_key |= kv.first == kAlignmentKey;
  const bool add_alignment = alignment != 32 && !has_alignment_key;
  std::vector<uint8_t> out;
  Put<uint32_t>(&out, 0x46554747u);  // "GGUF"
  Put<uint32_t>(&out, 3);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, kv_.size() + (add_alignment ? 1 : 0));
  for (const auto& [key, value] : kv_) {
    PutString(&out, key);
    PutValue(&out, value);
  }
  if (add_alignment) {
    PutString(&out, kAlignmentKey);
    PutValue(&out, Scalar(GgufValueType::kUint32, alignment));
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    offset += PadTo(offset, alignment);
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) Put<uint64_t>(&out, d);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&out, offset);
    offset += LayoutSize(t);
  }
  return out;
}

absl::Status GgufWriter::Emit(uint64_t alignment, const ByteSink& sink) const {
  const std::vector<uint8_t> header = EncodeHeader(alignment);
  if (absl::Status s = sink(header.data(), header.size()); !s.ok()) return s;
  if (tensors_.empty()) return absl::OkStatus();
  std::vector<uint8_t> zeros(PadTo(header.size(), alignment), 0);
  if (absl::Status s = sink(zeros.data(), zeros.size()); !s.ok()) return s;
  uint64_t offset = 0;
  std::vector<uint8_t> buffer;
  for (const Tensor& t : tensors_) {
    zeros.assign(PadTo(offset, alignment), 0);
    if (absl::Status s = sink(zeros.data(), zeros.size()); !s.ok()) return s;
    offset += zeros.size();
    const uint64_t size = LayoutSize(t);
    const uint8_t* bytes = t.data.data();
    if (t.produce) {
      buffer.assign(size, 0);
      if (absl::Status s = t.produce(buffer.data(), buffer.size()); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("tensor '", t.name, "': ", s.message()));
      }
      bytes = buffer.data();
    }
    if (absl::Status s = sink(bytes, size); !s.ok()) return s;
    offset += size;
  }
  return absl::OkStatus();
}

std::vector<uint8_t> GgufWriter::Serialize(uint64_t alignment) const {
  std::vector<uint8_t> out;
  const size_t header_size = EncodeHeader(alignment).size();
  const absl::Status s = Emit(alignment, [&](const uint8_t* bytes, size_t size) {
    out.insert(out.end(), bytes, bytes + size);
    return absl::OkStatus();
  });
  if (!s.ok()) {
    // A producer failed: keep the layout but leave the remaining bytes zero.
    uint64_t total = header_size, offset = 0;
    if (!tensors_.empty()) total += PadTo(header_size, alignment);
    for (const Tensor& t : tensors_) {
      offset += PadTo(offset, alignment) + LayoutSize(t);
    }
    out.resize(total + offset, 0);
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path, uint64_t alignment) const {
  if (absl::Status s = Validate(alignment); !s.ok()) return s;
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create '", tmp, "'"));
  std::vector<char> io_buffer(1 << 22);
  std::setvbuf(f, io_buffer.data(), _IOFBF, io_buffer.size());
  absl::Status s = Emit(alignment, [&](const uint8_t* bytes, size_t size) {
    if (size != 0 && std::fwrite(bytes, 1, size, f) != size) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot write '", tmp, "'"));
    }
    return absl::OkStatus();
  });
  if (std::fclose(f) != 0 && s.ok()) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("cannot close '", tmp, "'"));
  }
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("cannot rename '", tmp, "' to '", path, "'"));
  }
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

}  // namespace tessera
