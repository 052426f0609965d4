// GGUF parsing and validation (GgufFile::Parse).
//
// Every read goes through Cursor, which checks the remaining length first;
// every count read from the file is bounded by the bytes left before any
// memory is reserved for it.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/model/gguf.h"
#include "engine/quant/quant.h"

namespace tessera {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF files are little-endian and are read without byte swapping");

constexpr uint64_t kMaxNameLength = 65535;
constexpr uint32_t kMaxDims = 4;
// Smallest possible encodings, used to reject counts that cannot fit:
// kv = key length (8) + 1 key byte + value type (4) + 1 value byte.
constexpr uint64_t kMinKvBytes = 14;
// tensor info = name length (8) + 1 name byte + n_dims (4) + one dim (8) +
// type (4) + offset (8).
constexpr uint64_t kMinTensorInfoBytes = 33;

class Cursor {
 public:
  Cursor(const uint8_t* base, size_t size) : base_(base), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  absl::Status Need(uint64_t n, absl::string_view what) const {
    if (n > remaining()) {
      return absl::InvalidArgumentError(absl::StrCat("truncated file: ", what, " at byte offset ",
                                                     pos_, " needs ", n, " bytes but only ",
                                                     remaining(), " remain"));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    if (absl::Status s = Need(sizeof(T), what); !s.ok()) return s;
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A GGUF string: uint64 length then that many bytes (no terminator).
  absl::StatusOr<std::string> ReadString(absl::string_view what, uint64_t max_len) {
    const size_t at = pos_;
    absl::StatusOr<uint64_t> len = Read<uint64_t>(what);
    if (!len.ok()) return len.status();
    if (*len > max_len) {
      return absl::InvalidArgumentError(absl::StrCat(what, " at byte offset ", at, " has length ",
                                                     *len, ", more than the limit ", max_len));
    }
    if (absl::Status s = Need(*len, what); !s.ok()) return s;
    std::string out(reinterpret_cast<const char*>(base_ + pos_), *len);
    pos_ += *len;
    return out;
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
};

enum class Kind { kUnsigned, kSigned, kFloat, kBool, kString, kArray, kUnknown };

Kind KindOf(uint32_t t) {
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
      return Kind::kUnsigned;
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return Kind::kSigned;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return Kind::kFloat;
    case GgufValueType::kBool:
      return Kind::kBool;
    case GgufValueType::kString:
      return Kind::kString;
    case GgufValueType::kArray:
      return Kind::kArray;
  }
  return Kind::kUnknown;
}

// Encoded size of one element; strings report their minimum (the length).
uint64_t MinEncodedSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    default:
      return 8;
  }
}

absl::StatusOr<uint64_t> ReadUnsigned(Cursor& c, GgufValueType t, absl::string_view what) {
  switch (t) {
    case GgufValueType::kUint8:
      return c.Read<uint8_t>(what);
    case GgufValueType::kUint16:
      return c.Read<uint16_t>(what);
    case GgufValueType::kUint32:
      return c.Read<uint32_t>(what);
    default:
      return c.Read<uint64_t>(what);
  }
}

absl::StatusOr<int64_t> ReadSigned(Cursor& c, GgufValueType t, absl::string_view what) {
  switch (t) {
    case GgufValueType::kInt8:
      return c.Read<int8_t>(what);
    case GgufValueType::kInt16:
      return c.Read<int16_t>(what);
    case GgufValueType::kInt32:
      return c.Read<int32_t>(what);
    default:
      return c.Read<int64_t>(what);
  }
}

absl::StatusOr<double> ReadFloat(Cursor& c, GgufValueType t, absl::string_view what) {
  if (t == GgufValueType::kFloat32) return c.Read<float>(what);
  return c.Read<double>(what);
}

absl::StatusOr<bool> ReadBool(Cursor& c, absl::string_view what) {
  const size_t at = c.pos();
  absl::StatusOr<uint8_t> b = c.Read<uint8_t>(what);
  if (!b.ok()) return b.status();
  if (*b > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " at byte offset ", at, " is a bool with invalid value ", *b));
  }
  return *b == 1;
}

absl::StatusOr<std::string> ReadStringValue(Cursor& c, absl::string_view what) {
  // Value strings are bounded only by the file size.
  return c.ReadString(what, std::numeric_limits<uint64_t>::max());
}

// Reads `count` elements with `read_one`, which returns absl::StatusOr<T>.
template <typename T, typename F>
absl::StatusOr<std::vector<T>> ReadElements(uint64_t count, F read_one) {
  std::vector<T> out;
  out.reserve(count);  // the caller has bounded count by the bytes left
  for (uint64_t i = 0; i < count; ++i) {
    auto v = read_one();
    if (!v.ok()) return v.status();
    out.push_back(std::move(*v));
  }
  return out;
}

absl::Status ReadArray(Cursor& c, const std::string& what, GgufValue* out) {
  const size_t at = c.pos();
  absl::StatusOr<uint32_t> raw_type = c.Read<uint32_t>(what + " array element type");
  if (!raw_type.ok()) return raw_type.status();
  const Kind kind = KindOf(*raw_type);
  if (kind == Kind::kUnknown || kind == Kind::kArray) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " at byte offset ", at, ": ",
        kind == Kind::kArray ? "nested arrays are not supported" : "unknown array element type ",
        kind == Kind::kArray ? "" : absl::StrCat(*raw_type)));
  }
  const auto t = static_cast<GgufValueType>(*raw_type);
  const size_t count_at = c.pos();
  absl::StatusOr<uint64_t> count = c.Read<uint64_t>(what + " array count");
  if (!count.ok()) return count.status();
  uint64_t min_bytes = 0;
  if (__builtin_mul_overflow(*count, MinEncodedSize(t), &min_bytes) || min_bytes > c.remaining()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " at byte offset ", count_at, ": array count ", *count,
                     " does not fit in the ", c.remaining(), " bytes left in the file"));
  }
  out->type = GgufValueType::kArray;
  out->array_type = t;
  const std::string elem = what + " array element";
  switch (kind) {
    case Kind::kUnsigned: {
      auto v = ReadElements<uint64_t>(*count, [&] { return ReadUnsigned(c, t, elem); });
      if (!v.ok()) return v.status();
      out->value = std::move(*v);
      break;
    }
    case Kind::kSigned: {
      auto v = ReadElements<int64_t>(*count, [&] { return ReadSigned(c, t, elem); });
      if (!v.ok()) return v.status();
      out->value = std::move(*v);
      break;
    }
    case Kind::kFloat: {
      auto v = ReadElements<double>(*count, [&] { return ReadFloat(c, t, elem); });
      if (!v.ok()) return v.status();
      out->value = std::move(*v);
      break;
    }
    case Kind::kBool: {
      auto v = ReadElements<bool>(*count, [&] { return ReadBool(c, elem); });
      if (!v.ok()) return v.status();
      out->value = std::move(*v);
      break;
    }
    default: {
      auto v = ReadElements<std::string>(*count, [&] { return ReadStringValue(c, elem); });
      if (!v.ok()) return v.status();
      out->value = std::move(*v);
      break;
    }
  }
  return absl::OkStatus();
}

// Stores v (or its error) into out->value.
template <typename T>
absl::Status Assign(absl::StatusOr<T> v, GgufValue* out) {
  if (!v.ok()) return v.status();
  out->value = std::move(*v);
  return absl::OkStatus();
}

absl::StatusOr<GgufValue> ReadValue(Cursor& c, const std::string& key) {
  const std::string what = absl::StrCat("value of key '", key, "'");
  const size_t at = c.pos();
  absl::StatusOr<uint32_t> raw_type = c.Read<uint32_t>(what + " type");
  if (!raw_type.ok()) return raw_type.status();
  GgufValue out;
  out.type = static_cast<GgufValueType>(*raw_type);
  absl::Status s;
  switch (KindOf(*raw_type)) {
    case Kind::kUnsigned:
      s = Assign(ReadUnsigned(c, out.type, what), &out);
      break;
    case Kind::kSigned:
      s = Assign(ReadSigned(c, out.type, what), &out);
      break;
    case Kind::kFloat:
      s = Assign(ReadFloat(c, out.type, what), &out);
      break;
    case Kind::kBool:
      s = Assign(ReadBool(c, what), &out);
      break;
    case Kind::kString:
      s = Assign(ReadStringValue(c, what), &out);
      break;
    case Kind::kArray:
      s = ReadArray(c, what, &out);
      break;
    case Kind::kUnknown:
      return absl::InvalidArgumentError(absl::StrCat("key '", key, "' at byte offset ", at,
                                                     " has unknown value type ", *raw_type));
  }
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::string> ReadName(Cursor& c, absl::string_view what) {
  const size_t at = c.pos();
  absl::StatusOr<std::string> name = c.ReadString(what, kMaxNameLength);
  if (!name.ok()) return name.status();
  if (name->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " at byte offset ", at, " is empty"));
  }
  return name;
}

// Rounds pos up to a multiple of alignment (a power of two).
bool AlignUp(uint64_t pos, uint64_t alignment, uint64_t* out) {
  uint64_t bumped = 0;
  if (__builtin_add_overflow(pos, alignment - 1, &bumped)) return false;
  *out = bumped & ~(alignment - 1);
  return true;
}

}  // namespace

namespace {

// Names of ggml type ids, for messages about types this reader rejects.
absl::string_view GgmlTypeIdName(uint32_t id) {
  static constexpr absl::string_view kNames[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",  "",       "",      "Q5_0",  "Q5_1",
      "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
      "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16",  "",
      "",        "",       "TQ1_0",   "TQ2_0", "",       "",      "",      "MXFP4"};
  return id < std::size(kNames) ? kNames[id] : absl::string_view();
}

absl::StatusOr<GgmlType> ParseGgmlType(uint32_t id, const std::string& tensor) {
  switch (id) {
    case static_cast<uint32_t>(GgmlType::kF32):
    case static_cast<uint32_t>(GgmlType::kF16):
    case static_cast<uint32_t>(GgmlType::kBF16):
      return static_cast<GgmlType>(id);
    default:
      break;
  }
  if (quant::QuantTypeFromGgml(id)) return static_cast<GgmlType>(id);
  const absl::string_view name = GgmlTypeIdName(id);
  if (!name.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor '", tensor, "' has ggml type ", name, " (", id,
        "); supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, ",
        "Q6_K, IQ4_NL and IQ4_XS"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tensor '", tensor, "' has unknown ggml type id ", id));
}

struct Header {
  uint32_t version = 0;
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
};

absl::Status CheckVersion(uint32_t version) {
  if (version == 2 || version == 3) return absl::OkStatus();
  if (version == 1) {
    return absl::UnimplementedError("GGUF version 1 is not supported (only versions 2 and 3)");
  }
  if ((version & 0xffffu) == 0 && (version >> 16) != 0) {
    return absl::UnimplementedError(
        absl::StrCat("GGUF version field 0x", absl::Hex(version),
                     " looks byte-swapped; big-endian GGUF files are not supported"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported GGUF version ", version, " (only versions 2 and 3)"));
}

absl::StatusOr<Header> ReadHeader(Cursor& c) {
  absl::StatusOr<uint32_t> magic = c.Read<uint32_t>("magic");
  if (!magic.ok()) return magic.status();
  if (*magic != 0x46554747u) {  // "GGUF" read as a little-endian uint32
    return absl::InvalidArgumentError(absl::StrCat(
        "bad magic 0x", absl::Hex(*magic, absl::kZeroPad8), " at byte offset 0: not a GGUF file"));
  }
  Header h;
  absl::StatusOr<uint32_t> version = c.Read<uint32_t>("version");
  if (!version.ok()) return version.status();
  if (absl::Status s = CheckVersion(*version); !s.ok()) return s;
  h.version = *version;
  absl::StatusOr<uint64_t> tensors = c.Read<uint64_t>("tensor count");
  if (!tensors.ok()) return tensors.status();
  absl::StatusOr<uint64_t> kvs = c.Read<uint64_t>("metadata kv count");
  if (!kvs.ok()) return kvs.status();
  h.tensor_count = *tensors;
  h.kv_count = *kvs;
  uint64_t tensor_bytes = 0, kv_bytes = 0, total = 0;
  if (__builtin_mul_overflow(h.tensor_count, kMinTensorInfoBytes, &tensor_bytes) ||
      __builtin_mul_overflow(h.kv_count, kMinKvBytes, &kv_bytes) ||
      __builtin_add_overflow(tensor_bytes, kv_bytes, &total) || total > c.remaining()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header at byte offset 8 claims ", h.tensor_count, " tensors and ", h.kv_count,
        " metadata keys, which cannot fit in the ", c.remaining(), " bytes left in the file"));
  }
  return h;
}

absl::Status ReadMetadata(Cursor& c, uint64_t count,
                          std::map<std::string, GgufValue, std::less<>>* out) {
  for (uint64_t i = 0; i < count; ++i) {
    const size_t at = c.pos();
    absl::StatusOr<std::string> key = ReadName(c, absl::StrCat("metadata key #", i));
    if (!key.ok()) return key.status();
    if (out->count(*key) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate metadata key '", *key, "' at byte offset ", at));
    }
    absl::StatusOr<GgufValue> value = ReadValue(c, *key);
    if (!value.ok()) return value.status();
    out->emplace(std::move(*key), std::move(*value));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ResolveAlignment(
    const std::map<std::string, GgufValue, std::less<>>& metadata) {
  auto it = metadata.find("general.alignment");
  if (it == metadata.end()) return 32;
  const GgufValue& v = it->second;
  if (v.type != GgufValueType::kUint32) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata key 'general.alignment' must be a uint32, not value type ",
                     static_cast<uint32_t>(v.type)));
  }
  const uint64_t a = std::get<uint64_t>(v.value);
  if (a == 0 || !std::has_single_bit(a)) {
    return absl::InvalidArgumentError(absl::StrCat("metadata key 'general.alignment' is ", a,
                                                   "; it must be a nonzero power of two"));
  }
  return a;
}

absl::StatusOr<GgufTensorInfo> ReadTensorInfo(Cursor& c, uint64_t index) {
  GgufTensorInfo t;
  absl::StatusOr<std::string> name = ReadName(c, absl::StrCat("tensor name #", index));
  if (!name.ok()) return name.status();
  t.name = std::move(*name);
  const std::string what = absl::StrCat("tensor '", t.name, "'");
  const size_t dims_at = c.pos();
  absl::StatusOr<uint32_t> n_dims = c.Read<uint32_t>(what + " n_dims");
  if (!n_dims.ok()) return n_dims.status();
  if (*n_dims == 0 || *n_dims > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(what, " at byte offset ", dims_at,
                                                   " has n_dims ", *n_dims, " (must be 1..4)"));
  }
  for (uint32_t d = 0; d < *n_dims; ++d) {
    absl::StatusOr<uint64_t> dim = c.Read<uint64_t>(what + " dim");
    if (!dim.ok()) return dim.status();
    if (*dim == 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has dim ", d, " equal to zero"));
    }
    t.dims.push_back(*dim);
  }
  absl::StatusOr<uint32_t> type_id = c.Read<uint32_t>(what + " type");
  if (!type_id.ok()) return type_id.status();
  absl::StatusOr<GgmlType> type = ParseGgmlType(*type_id, t.name);
  if (!type.ok()) return type.status();
  t.type = *type;
  absl::StatusOr<uint64_t> offset = c.Read<uint64_t>(what + " offset");
  if (!offset.ok()) return offset.status();
  t.offset = *offset;
  absl::StatusOr<uint64_t> bytes = GgmlTensorBytes(t.dims, t.type);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", bytes.status().message()));
  }
  t.num_bytes = *bytes;
  t.num_elements = GgmlElementCount(t.dims);
  return t;
}

// Places every tensor in the data section and checks alignment, bounds and
// overlap. `header_end` is where the tensor infos ended.
absl::Status LayoutTensors(uint64_t header_end, uint64_t alignment, const uint8_t* base,
                           size_t size, std::vector<GgufTensorInfo>* tensors) {
  if (tensors->empty()) return absl::OkStatus();
  uint64_t data_start = 0;
  if (!AlignUp(header_end, alignment, &data_start) || data_start > size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data section (header ends at byte offset ", header_end, ", alignment ",
                     alignment, ") starts past the end of the file (", size, " bytes)"));
  }
  for (GgufTensorInfo& t : *tensors) {
    if (t.offset % alignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' offset ", t.offset,
                                                     " is not a multiple of the alignment ",
                                                     alignment));
    }
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(data_start, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.num_bytes, &end) || end > size) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "' data (offset ", t.offset, ", ", t.num_bytes,
                       " bytes, data section at byte ", data_start,
                       ") extends past the end of the file (", size, " bytes)"));
    }
    t.data = base + begin;
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : *tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& prev = *by_offset[i - 1];
    const GgufTensorInfo& cur = *by_offset[i];
    // prev.offset + prev.num_bytes cannot overflow: both are bounded by size.
    if (prev.offset + prev.num_bytes > cur.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensors '", prev.name, "' (offset ", prev.offset, ", ", prev.num_bytes,
                       " bytes) and '", cur.name, "' (offset ", cur.offset, ") overlap"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GgufFile::Parse() {
  Cursor c(base_, size_);
  absl::StatusOr<Header> header = ReadHeader(c);
  if (!header.ok()) return header.status();
  version_ = header->version;
  if (absl::Status s = ReadMetadata(c, header->kv_count, &metadata_); !s.ok()) return s;
  absl::StatusOr<uint64_t> alignment = ResolveAlignment(metadata_);
  if (!alignment.ok()) return alignment.status();
  alignment_ = *alignment;
  tensors_.reserve(header->tensor_count);  // bounded by the file size in ReadHeader
  for (uint64_t i = 0; i < header->tensor_count; ++i) {
    const size_t at = c.pos();
    absl::StatusOr<GgufTensorInfo> t = ReadTensorInfo(c, i);
    if (!t.ok()) return t.status();
    if (!tensor_index_.emplace(t->name, tensors_.size()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate tensor name '", t->name, "' at byte offset ", at));
    }
    tensors_.push_back(std::move(*t));
  }
  return LayoutTensors(c.pos(), alignment_, base_, size_, &tensors_);
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromParts(
    std::map<std::string, GgufValue, std::less<>> metadata, std::vector<GgufTensorInfo> tensors,
    std::vector<std::shared_ptr<const void>> keep_alive) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->version_ = 3;
  file->metadata_ = std::move(metadata);
  if (auto a = ResolveAlignment(file->metadata_); a.ok()) file->alignment_ = *a;
  uint64_t offset = 0;
  for (GgufTensorInfo& t : tensors) {
    const std::string what = absl::StrCat("tensor '", t.name, "'");
    if (t.name.empty() || t.name.size() > kMaxNameLength) {
      return absl::InvalidArgumentError("tensor name is empty or too long");
    }
    absl::StatusOr<uint64_t> bytes = GgmlTensorBytes(t.dims, t.type);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", bytes.status().message()));
    }
    if (t.data == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " has no data"));
    t.num_bytes = *bytes;
    t.num_elements = GgmlElementCount(t.dims);
    t.offset = offset;
    offset += t.num_bytes;  // bounded by the bytes the owners hold
    if (!file->tensor_index_.emplace(t.name, file->tensors_.size()).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate ", what));
    }
    file->tensors_.push_back(std::move(t));
  }
  file->keep_alive_ = std::move(keep_alive);
  return file;
}

}  // namespace tessera
