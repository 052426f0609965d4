// SafetensorsFile: mapping and header validation; ParseShardIndex.
#include "engine/format/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/format/json_strict.h"

namespace tessera {
namespace {

using json = nlohmann::json;

struct DtypeEntry {
  std::string_view name;
  SafetensorsDtype dtype;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {"BOOL", SafetensorsDtype::kBool, 1},      {"U8", SafetensorsDtype::kU8, 1},
    {"I8", SafetensorsDtype::kI8, 1},          {"F8_E5M2", SafetensorsDtype::kF8E5M2, 1},
    {"F8_E4M3", SafetensorsDtype::kF8E4M3, 1}, {"I16", SafetensorsDtype::kI16, 2},
    {"U16", SafetensorsDtype::kU16, 2},        {"F16", SafetensorsDtype::kF16, 2},
    {"BF16", SafetensorsDtype::kBF16, 2},      {"I32", SafetensorsDtype::kI32, 4},
    {"U32", SafetensorsDtype::kU32, 4},        {"F32", SafetensorsDtype::kF32, 4},
    {"F64", SafetensorsDtype::kF64, 8},        {"I64", SafetensorsDtype::kI64, 8},
    {"U64", SafetensorsDtype::kU64, 8},
};

// Tensors have at most this many dims here (PyTorch allows 64).
constexpr size_t kMaxRank = 8;

absl::Status Bad(const std::string& tensor, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("tensor \"", tensor, "\": ", message));
}

absl::StatusOr<SafetensorsDtype> ParseDtype(const std::string& tensor, const json& v) {
  if (!v.is_string()) return Bad(tensor, "\"dtype\" is not a string");
  const std::string& s = v.get_ref<const std::string&>();
  for (const DtypeEntry& e : kDtypes) {
    if (e.name == s) return e.dtype;
  }
  return Bad(tensor, absl::StrCat("unknown dtype \"", s, "\""));
}

// A JSON number that is a non-negative integer (no fraction, no sign).
bool AsUint(const json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  *out = v.get<uint64_t>();
  return true;
}

absl::Status ParseShape(const std::string& tensor, const json& v, SafetensorsTensor* t) {
  if (!v.is_array()) return Bad(tensor, "\"shape\" is not an array");
  if (v.size() > kMaxRank) {
    return Bad(tensor, absl::StrCat("shape has ", v.size(), " dims (at most ", kMaxRank, ")"));
  }
  uint64_t count = 1;
  for (const json& d : v) {
    uint64_t dim = 0;
    if (!AsUint(d, &dim)) {
      return Bad(tensor, absl::StrCat("shape entry ", d.dump(), " is not a non-negative integer"));
    }
    if (__builtin_mul_overflow(count, dim, &count)) {
      return Bad(tensor, "element count (product of the shape) overflows 64 bits");
    }
    t->shape.push_back(dim);
  }
  t->num_elements = count;
  return absl::OkStatus();
}

absl::Status ParseOffsets(const std::string& tensor, const json& v, SafetensorsTensor* t) {
  if (!v.is_array() || v.size() != 2 || !AsUint(v[0], &t->begin) || !AsUint(v[1], &t->end)) {
    return Bad(tensor, "\"data_offsets\" must be two non-negative integers [begin, end]");
  }
  if (t->end < t->begin) {
    return Bad(tensor, absl::StrCat("data_offsets end ", t->end, " is before begin ", t->begin));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(t->num_elements, SafetensorsDtypeSize(t->dtype), &bytes)) {
    return Bad(tensor, "byte size overflows 64 bits");
  }
  if (t->end - t->begin != bytes) {
    return Bad(tensor, absl::StrCat("shape and dtype need ", bytes, " bytes but data_offsets [",
                                    t->begin, ", ", t->end, "] span ", t->end - t->begin));
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsTensor> ParseEntry(const std::string& name, const json& v) {
  if (name.empty()) return absl::InvalidArgumentError("a tensor has an empty name");
  if (!v.is_object()) return Bad(name, "entry is not an object");
  for (const auto& [key, unused] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return Bad(name, absl::StrCat("unexpected field \"", key, "\""));
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(key)) return Bad(name, absl::StrCat("missing field \"", key, "\""));
  }
  SafetensorsTensor t;
  t.name = name;
  auto dtype = ParseDtype(name, v["dtype"]);
  if (!dtype.ok()) return dtype.status();
  t.dtype = *dtype;
  if (auto s = ParseShape(name, v["shape"], &t); !s.ok()) return s;
  if (auto s = ParseOffsets(name, v["data_offsets"], &t); !s.ok()) return s;
  return t;
}

absl::Status ParseMetadata(const json& v, std::map<std::string, std::string, std::less<>>* out) {
  if (!v.is_object()) return absl::InvalidArgumentError("\"__metadata__\" is not an object");
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"__metadata__\" value of \"", key, "\" is not a string"));
    }
    (*out)[key] = value.get<std::string>();
  }
  return absl::OkStatus();
}

// The tensors, sorted by offset, must tile [0, buffer_size) exactly.
absl::Status CheckCoverage(const std::vector<SafetensorsTensor>& tensors, uint64_t buffer_size) {
  std::vector<const SafetensorsTensor*> order;
  for (const SafetensorsTensor& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const SafetensorsTensor* prev = nullptr;
  for (const SafetensorsTensor* t : order) {
    if (t->begin < at) {
      return absl::InvalidArgumentError(absl::StrCat("tensors \"", prev->name, "\" [", prev->begin,
                                                     ", ", prev->end, ") and \"", t->name, "\" [",
                                                     t->begin, ", ", t->end, ") overlap"));
    }
    if (t->begin > at) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data bytes [", at, ", ", t->begin, ") belong to no tensor (before \"", t->name, "\")"));
    }
    at = t->end;
    prev = t;
  }
  if (at != buffer_size) {
    return absl::InvalidArgumentError(
        at > buffer_size
            ? absl::StrCat("tensor data ends at byte ", at, " of the buffer, but the file holds ",
                           buffer_size, " data bytes (truncated?)")
            : absl::StrCat("data bytes [", at, ", ", buffer_size, ") belong to no tensor"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "?";
}

size_t SafetensorsDtypeSize(SafetensorsDtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 0;
}

absl::Status SafetensorsFile::Parse() {
  if (size_ < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("file of ", size_, " bytes is too short for the 8-byte header length"));
  }
  uint64_t n = 0;
  std::memcpy(&n, base_, 8);  // little-endian; checked for the host in the GGUF reader
  if (n > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("header length ", n, " exceeds the limit of ",
                                                   kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (n > size_ - 8) {
    return absl::InvalidArgumentError(absl::StrCat("header length ", n, " exceeds the ", size_ - 8,
                                                   " bytes after the length field"));
  }
  if (n < 2 || base_[8] != '{') {
    return absl::InvalidArgumentError("header does not start with a JSON object ('{')");
  }
  const std::string_view text(reinterpret_cast<const char*>(base_ + 8), n);
  auto header = ParseJsonStrict(text, "safetensors header");
  if (!header.ok()) return header.status();
  if (!header->is_object()) return absl::InvalidArgumentError("header is not a JSON object");
  for (const auto& [name, entry] : header->items()) {
    if (name == "__metadata__") {
      if (auto s = ParseMetadata(entry, &metadata_); !s.ok()) return s;
      continue;
    }
    auto t = ParseEntry(name, entry);
    if (!t.ok()) return t.status();
    index_.emplace(t->name, tensors_.size());  // names are unique: duplicate keys were refused
    tensors_.push_back(std::move(*t));
  }
  const uint64_t data_start = 8 + n;
  if (auto s = CheckCoverage(tensors_, size_ - data_start); !s.ok()) return s;
  for (SafetensorsTensor& t : tensors_) t.data = base_ + data_start + t.begin;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  auto mapped = MappedFile::Open(path, "a safetensors file");
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->mapped_ = std::move(*mapped);
  file->base_ = file->mapped_->data();
  file->size_ = file->mapped_->size();
  if (absl::Status s = file->Parse(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  for (SafetensorsTensor& t : file->tensors_) {
    t.source = {file->mapped_.get(), static_cast<uint64_t>(t.data - file->base_)};
  }
  return file;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBytes(
    std::vector<uint8_t> bytes) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->owned_ = std::move(bytes);
  file->base_ = file->owned_.data();
  file->size_ = file->owned_.size();
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

absl::Status CheckShardName(const std::string& tensor, const std::string& file) {
  const bool bad = file.empty() || file.find('/') != std::string::npos ||
                   file.find('\\') != std::string::npos || file == "." || file == ".." ||
                   file.find('\0') != std::string::npos;
  if (bad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "index: shard \"", file, "\" of tensor \"", tensor,
        "\" is not a plain file name in the model folder (no '/', '..' or absolute paths)"));
  }
  constexpr std::string_view kSuffix = ".safetensors";
  if (file.size() <= kSuffix.size() ||
      file.compare(file.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("index: shard \"", file, "\" does not end in .safetensors"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view json_text) {
  auto doc = ParseJsonStrict(json_text, "model.safetensors.index.json");
  if (!doc.ok()) return doc.status();
  if (!doc->is_object() || !doc->contains("weight_map") || !(*doc)["weight_map"].is_object()) {
    return absl::InvalidArgumentError("index: no \"weight_map\" object");
  }
  const json& map = (*doc)["weight_map"];
  if (map.empty()) return absl::InvalidArgumentError("index: \"weight_map\" is empty");
  ShardIndex index;
  for (const auto& [tensor, file] : map.items()) {
    if (!file.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("index: shard of tensor \"", tensor, "\" is not a string"));
    }
    const std::string f = file.get<std::string>();
    if (auto s = CheckShardName(tensor, f); !s.ok()) return s;
    index.weight_map.emplace(tensor, f);
    if (std::find(index.shards.begin(), index.shards.end(), f) == index.shards.end()) {
      index.shards.push_back(f);
    }
  }
  std::sort(index.shards.begin(), index.shards.end());
  return index;
}

}  // namespace tessera
