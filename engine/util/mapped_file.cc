#include "engine/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path,
                                                             std::string_view kind) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open '", path, "'"));
  const std::string not_kind = kind.empty() ? "" : absl::StrCat(", not ", std::string(kind));
  struct stat st;
  absl::Status error;
  if (fstat(fd, &st) != 0) {
    error = absl::ErrnoToStatus(errno, absl::StrCat("cannot stat '", path, "'"));
  } else if (!S_ISREG(st.st_mode)) {
    error = absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a regular file", not_kind));
  } else if (st.st_size == 0) {
    error = absl::InvalidArgumentError(absl::StrCat("'", path, "' is empty", not_kind));
  }
  if (!error.ok()) {
    close(fd);
    return error;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot mmap '", path, "'"));
  }
  return std::unique_ptr<MappedFile>(new MappedFile(fd, map, size));
}

MappedFile::~MappedFile() {
  munmap(map_, size_);
  close(fd_);
}

absl::Status MappedFile::Read(uint64_t offset, void* dst, size_t n) const {
  const iovec part{dst, n};
  return ReadScattered(offset, std::span<const iovec>(&part, 1));
}

absl::Status MappedFile::ReadScattered(uint64_t offset, std::span<const iovec> parts) const {
  uint64_t total = 0;
  for (const iovec& p : parts) total += p.iov_len;
  if (offset > size_ || total > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("read of ", total, " bytes at ", offset,
                                              " past the end of a ", size_, "-byte file"));
  }
  std::vector<iovec> left(parts.begin(), parts.end());
  size_t first = 0;
  while (first < left.size() && left[first].iov_len == 0) ++first;
  while (first < left.size()) {
    const int count = static_cast<int>(std::min<size_t>(left.size() - first, IOV_MAX));
    const ssize_t got = preadv(fd_, left.data() + first, count, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return got < 0 ? absl::ErrnoToStatus(errno, "pread failed")
                     : absl::DataLossError("the file ended early");
    }
    offset += static_cast<uint64_t>(got);
    // Skip the parts filled (and empty ones); shorten the one partly filled.
    for (size_t done = static_cast<size_t>(got);
         done > 0 || (first < left.size() && left[first].iov_len == 0);) {
      const size_t take = std::min(done, left[first].iov_len);
      left[first].iov_base = static_cast<uint8_t*>(left[first].iov_base) + take;
      left[first].iov_len -= take;
      done -= take;
      if (left[first].iov_len == 0) ++first;
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
