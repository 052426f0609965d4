// A read-only file mapped into memory whose descriptor stays open, so that
// its ranges can also be copied with pread.
//
// Weights are read once at load, to be packed: the kernel's copy from the
// page cache (pread) does that without a page fault per 4 KiB page of the
// mapping. Those faults are cheap on bare metal but cost several times the
// copy under hypervisors that shadow the guest's page tables.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

class MappedFile {
 public:
  // Opens and maps a regular, non-empty file. `kind` ("a GGUF file")
  // words the errors of a directory or an empty file: "'x' is empty, not a
  // GGUF file".
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path,
                                                          std::string_view kind = "");

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(map_); }
  size_t size() const { return size_; }

  // Bytes [offset, offset + n) into dst. Past the end of the file, or on an
  // I/O error, an error (dst partly written).
  absl::Status Read(uint64_t offset, void* dst, size_t n) const;
  // Consecutive bytes from `offset` into each of `parts` in turn.
  absl::Status ReadScattered(uint64_t offset, std::span<const iovec> parts) const;

 private:
  MappedFile(int fd, void* map, size_t size) : fd_(fd), map_(map), size_(size) {}

  int fd_ = -1;
  void* map_ = nullptr;
  size_t size_ = 0;
};

// Where a tensor's bytes also lie in a mapped file, for a reader that
// would rather copy them than touch the mapping. `file` is null for bytes
// held in memory only (converted tensors, in-memory images).
struct FileRange {
  const MappedFile* file = nullptr;
  uint64_t offset = 0;
};

}  // namespace tessera
