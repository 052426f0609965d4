// MappedFile: the mapping and pread see the same bytes; reads past the end
// and files that cannot be mapped are errors, not crashes.
#include <climits>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "engine/util/mapped_file.h"
#include "gtest/gtest.h"
#include "tests/testing/hf_folder.h"

namespace tessera {
namespace {

std::string WriteBytes(const testing::TempDir& dir, const std::vector<uint8_t>& bytes) {
  const std::string path = dir / "bytes.bin";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::vector<uint8_t> Counting(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 251);
  return bytes;
}

TEST(MappedFile, ReadsWhatTheMappingHolds) {
  testing::TempDir dir;
  const std::vector<uint8_t> bytes = Counting(100000);
  auto file = MappedFile::Open(WriteBytes(dir, bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->size(), bytes.size());
  EXPECT_EQ(std::vector<uint8_t>((*file)->data(), (*file)->data() + bytes.size()), bytes);
  std::vector<uint8_t> got(5000);
  ASSERT_TRUE((*file)->Read(12345, got.data(), got.size()).ok());
  EXPECT_EQ(got, std::vector<uint8_t>(bytes.begin() + 12345, bytes.begin() + 17345));
  ASSERT_TRUE((*file)->Read(bytes.size() - 3, got.data(), 3).ok());  // up to the last byte
  EXPECT_EQ(got[2], bytes.back());
}

// Consecutive bytes go to each part in turn, also past IOV_MAX parts.
TEST(MappedFile, ScatteredReadFillsEachPartInTurn) {
  testing::TempDir dir;
  const std::vector<uint8_t> bytes = Counting(1 << 16);
  auto file = MappedFile::Open(WriteBytes(dir, bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  const size_t parts = IOV_MAX + 300, each = 17;
  std::vector<uint8_t> out(parts * 2 * each, 0xAA);
  std::vector<iovec> iov;
  for (size_t i = 0; i < parts; ++i) iov.push_back({out.data() + i * 2 * each, each});
  ASSERT_TRUE((*file)->ReadScattered(99, iov).ok());
  for (size_t i = 0; i < parts; ++i) {
    for (size_t b = 0; b < each; ++b) {
      ASSERT_EQ(out[i * 2 * each + b], bytes[99 + i * each + b]) << i << "," << b;
      ASSERT_EQ(out[i * 2 * each + each + b], 0xAA) << "gap " << i;
    }
  }
}

TEST(MappedFile, ReadsPastTheEndAreRefused) {
  testing::TempDir dir;
  auto file = MappedFile::Open(WriteBytes(dir, Counting(1000)));
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<uint8_t> got(10);
  EXPECT_EQ((*file)->Read(995, got.data(), 10).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*file)->Read(5000, got.data(), 1).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*file)->Read(UINT64_MAX, got.data(), 2).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE((*file)->Read(1000, got.data(), 0).ok());
}

TEST(MappedFile, WhatCannotBeMappedIsAnError) {
  testing::TempDir dir;
  EXPECT_EQ(MappedFile::Open(dir / "missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(MappedFile::Open(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MappedFile::Open(WriteBytes(dir, {})).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The caller's kind of file words the refusal.
  const absl::Status empty = MappedFile::Open(WriteBytes(dir, {}), "a GGUF file").status();
  EXPECT_TRUE(absl::EndsWith(empty.message(), "' is empty, not a GGUF file")) << empty;
  const absl::Status folder = MappedFile::Open(dir.path(), "a safetensors file").status();
  EXPECT_TRUE(absl::EndsWith(folder.message(), "' is not a regular file, not a safetensors file"))
      << folder;
}

}  // namespace
}  // namespace tessera
