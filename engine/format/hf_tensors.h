// The tensors of a Hugging Face checkpoint and their GGUF counterparts
// (names from gguf-py's tensor_mapping.py, dims in ggml order), shared by
// the folder loader and the writer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/format/hf_config.h"
#include "engine/format/safetensors.h"
#include "engine/model/gguf.h"

namespace tessera {

enum class HfTransform {
  kNone,
  kPermuteQ,  // llama: rows of each of `heads` heads from halves to pairs
  kPermuteK,  // the same over kv_heads
  kPlusOne,   // gemma: GGUF stores 1 + w
};

struct HfTensorSpec {
  std::string hf_name;
  std::string gguf_name;
  std::vector<uint64_t> dims;  // ggml order: reversed PyTorch shape
  bool f32 = false;            // 1-D tensors and norms are F32 in GGUF
  HfTransform transform = HfTransform::kNone;
  bool optional = false;  // lm_head of a tied model
};

// Every tensor the family's checkpoint holds, in a fixed order.
std::vector<HfTensorSpec> HfTensorSpecs(const HfModelConfig& m);

// Rows of a [rows, row_bytes] matrix permuted as LlamaModel.permute does
// (`inverse` undoes it). rows must be a multiple of 2 * groups.
void PermuteRows(const uint8_t* src, uint8_t* dst, uint64_t rows, uint64_t row_bytes,
                 uint32_t groups, bool inverse);

// One checkpoint tensor found in a shard.
struct HfSourceTensor {
  const SafetensorsTensor* tensor = nullptr;
  std::string shard;
};

// Builds the GGUF view: every spec'd tensor present (unless optional) with
// the expected shape and an F32/F16/BF16 dtype, no tensor left unused
// (rotary_emb.inv_freq buffers excepted), transformations applied into
// owned buffers. `owners` keep the shards mapped.
absl::StatusOr<std::unique_ptr<GgufFile>> BuildHfGguf(
    const HfModelConfig& m, const std::map<std::string, HfSourceTensor, std::less<>>& sources,
    std::vector<std::shared_ptr<const void>> owners);

}  // namespace tessera
