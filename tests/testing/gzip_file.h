// Reads a gzip file whole (the tokenizer.json test data is gzipped). What
// includes it links ZLIB::ZLIB: the tests that read that data
// (tests/CMakeLists.txt) and the tokenizer benchmark (bench/CMakeLists.txt).
#pragma once

#include <zlib.h>

#include <string>

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

}  // namespace tessera::testing
