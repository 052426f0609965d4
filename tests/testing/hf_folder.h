// Helpers for tests of Hugging Face folders: temporary folders, random
// models as in-memory GGUF files, and a small safetensors writer for
// building deliberately wrong checkpoints.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/model/model_writer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera::testing {

// A fresh empty folder, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("tessera-hf-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A GGUF file holding a folder's view (OpenHfWeights: its tensors and keys)
// plus `vocab`'s tokenizer keys, so that the engine can run the folder's
// weights driven by token ids.
inline std::string WriteView(const GgufFile& view, const GgufFile& vocab,
                             const std::string& path) {
  GgufWriter w;
  for (const auto& [key, value] : view.metadata()) w.SetValue(key, value);
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.SetValue(key, value);
  }
  for (const GgufTensorInfo& t : view.tensors()) {
    w.AddTensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.num_bytes));
  }
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

inline std::unique_ptr<GgufFile> RandomGguf(const RandomModelSpec& spec) {
  GgufWriter writer;
  EXPECT_TRUE(BuildRandomModel(spec, &writer).ok());
  auto file = GgufFile::FromBytes(writer.Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? std::move(*file) : nullptr;
}

inline RandomModelSpec SmallLlama(uint32_t dim = 32, uint32_t heads = 4, uint32_t kv_heads = 2) {
  RandomModelSpec spec;
  spec.dim = dim;
  spec.layers = 2;
  spec.heads = heads;
  spec.kv_heads = kv_heads;
  spec.ffn = 48;
  spec.vocab_size = 300;
  spec.context = 256;
  spec.dtype = GgmlType::kBF16;
  spec.seed = 7;
  return spec;
}

struct StEntry {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

inline void WriteSafetensors(const std::string& path, const std::vector<StEntry>& entries) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t at = 0;
  for (const StEntry& e : entries) {
    h[e.name] = {
        {"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {at, at + e.bytes.size()}}};
    at += e.bytes.size();
  }
  const std::string text = h.dump();
  const uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text;
  for (const StEntry& e : entries)
    out.write(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size());
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace tessera::testing
