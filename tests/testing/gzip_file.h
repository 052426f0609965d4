// Reads the test data that the source tree stores gzipped: tokenizer.json,
// reference ids and corpora (NAME.gz, read whole) and most GGUF vocabularies
// of tests/data/vocab (NAME.gguf.gz, decompressed to a file, since
// GgufFile::Open maps a path). What includes it links ZLIB::ZLIB: the tests
// (tests/CMakeLists.txt), the tokenizer benchmark (bench/CMakeLists.txt) and
// the fuzz harnesses (tests/fuzz/CMakeLists.txt).
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

namespace tessera::testing {

// The decompressed bytes, or "" when the file cannot be opened.
inline std::string ReadGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return "";
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

// PATH's bytes, or where only PATH.gz exists its decompressed bytes ("" when
// neither can be read): for files stored gzipped only when large.
inline std::string ReadPlainOrGzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ReadGzip(path + ".gz");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

namespace gzip_internal {

// Where UnpackedPath puts PATH's copy: PATH's place in the source tree,
// under TESSERA_BINARY_DIR/unpacked (a path outside the tree: its name).
inline std::filesystem::path CopyPath(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path(path).lexically_relative(TESSERA_SOURCE_DIR);
  const bool inside = !rel.empty() && *rel.begin() != "..";
  return fs::path(TESSERA_BINARY_DIR) / "unpacked" / (inside ? rel : fs::path(path).filename());
}

// Whether COPY exists and is newer than GZ.
inline bool IsFresh(const std::filesystem::path& copy, const std::filesystem::path& gz) {
  std::error_code copy_ec, gz_ec;
  const auto built = std::filesystem::last_write_time(copy, copy_ec);
  const auto stored = std::filesystem::last_write_time(gz, gz_ec);
  return !copy_ec && !gz_ec && built >= stored;
}

// Writes BYTES to OUT through a file of this process renamed over it, so
// that tests running in parallel never map a partly written file.
inline bool WriteWhole(const std::filesystem::path& out, const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(out.parent_path(), ec);
  const std::filesystem::path tmp = out.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) return false;
  }
  std::filesystem::rename(tmp, out, ec);
  return !ec;
}

}  // namespace gzip_internal

// PATH (under TESSERA_SOURCE_DIR) as a plain file that can be opened by
// path: PATH itself when it exists, else PATH.gz decompressed into
// TESSERA_BINARY_DIR/unpacked/ (once: a copy newer than PATH.gz is reused).
// "" when neither can be read.
inline std::string UnpackedPath(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return path;
  const std::string gz = path + ".gz";
  if (!std::filesystem::exists(gz, ec)) return "";
  const std::filesystem::path copy = gzip_internal::CopyPath(path);
  if (gzip_internal::IsFresh(copy, gz)) return copy.string();
  const std::string bytes = ReadGzip(gz);
  if (bytes.empty() || !gzip_internal::WriteWhole(copy, bytes)) return "";
  return copy.string();
}

}  // namespace tessera::testing
