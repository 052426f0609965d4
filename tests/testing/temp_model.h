// Random-weight GGUF models written to the temp directory for tests, removed
// when the test process exits.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/model/model_writer.h"
#include "gtest/gtest.h"

namespace tessera::testing {

// Deletes the files (and folders, with their contents) it holds when
// destroyed (at process exit).
class TempFiles {
 public:
  ~TempFiles() {
    std::error_code ignored;
    for (const auto& p : paths_) std::filesystem::remove_all(p, ignored);
  }
  void Add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.push_back(path);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> paths_;
};

inline TempFiles& ProcessTempFiles() {
  static TempFiles files;
  return files;
}

// Writes the model described by `spec` to a file named after `tag` and the
// process id; returns its path.
inline std::string WriteTempModel(const RandomModelSpec& spec, const std::string& tag) {
  GgufWriter writer;
  EXPECT_TRUE(BuildRandomModel(spec, &writer).ok());
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera-" + tag + "-" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  EXPECT_TRUE(writer.WriteFile(path).ok());
  ProcessTempFiles().Add(path);
  return path;
}

}  // namespace tessera::testing
