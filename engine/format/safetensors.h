// Safetensors reader (memory-mapped) with strict validation, and the reader
// of a sharded checkpoint's model.safetensors.index.json.
//
// File layout: an 8-byte little-endian header length N, N bytes of JSON
// (an object of tensor entries {"dtype", "shape", "data_offsets": [begin,
// end]} plus an optional "__metadata__" object of strings), then the data
// buffer. Offsets are relative to the buffer; the tensors must cover it
// exactly, with no overlap and no gap.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/util/mapped_file.h"

namespace tessera {

// Header lengths above this are refused before anything is read.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

enum class SafetensorsDtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype);
size_t SafetensorsDtypeSize(SafetensorsDtype dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<uint64_t> shape;  // row-major, outermost first (PyTorch order); [] is a scalar
  uint64_t num_elements = 0;
  uint64_t begin = 0;  // byte offsets within the data buffer
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // valid while the file lives
  FileRange source;               // the same bytes in the mapped file (Open only)
};

class SafetensorsFile {
 public:
  // Maps and validates a file. The returned object owns the mapping.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Parses an in-memory image (tests).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> FromBytes(std::vector<uint8_t> bytes);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // In name order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(std::string_view name) const;
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  absl::Status Parse();

  std::vector<uint8_t> owned_;
  std::unique_ptr<MappedFile> mapped_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string, std::less<>> metadata_;
};

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}.
struct ShardIndex {
  std::vector<std::string> shards;                             // distinct file names, sorted
  std::map<std::string, std::string, std::less<>> weight_map;  // tensor -> shard file
};

// Validates the index: weight_map present and non-empty, every tensor named
// once (duplicate keys refused), every shard a plain file name inside the
// folder (no '/', no '..', not absolute, ends in .safetensors).
absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view json_text);

}  // namespace tessera
