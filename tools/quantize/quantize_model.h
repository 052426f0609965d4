// tessera-quantize's work: a model (GGUF with f32/f16/bf16 tensors, or a
// Hugging Face folder's GgufFile view) written as a quantized GGUF file with
// llama.cpp's per-tensor choice of types (engine/quant/quantize_plan.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "engine/model/gguf.h"
#include "engine/quant/quantize_plan.h"

namespace tessera::quantize {

struct TensorEvent {
  size_t index = 0;        // 0-based, in file order
  size_t count = 0;        // tensors in the file
  const GgufTensorInfo* tensor = nullptr;
  uint32_t out_type = 0;   // ggml type written
  bool fallback = false;   // rows are not whole blocks of the preferred type
};

struct QuantizeOptions {
  quant::QuantMix mix = quant::QuantMix::kQ8_0;
  int threads = 1;
  // Called (from the writing thread) as each tensor starts.
  std::function<void(const TensorEvent&)> on_tensor;
  // Called from worker threads, serialized, with elements done so far and
  // the model's total.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  // Called once after the input's metadata is copied, to add or replace
  // keys (a Hugging Face folder's tokenizer).
  std::function<void(GgufWriter&)> add_metadata;
};

// Writes `in` to out_path as a quantized GGUF: every metadata key copied
// (split keys dropped), general.file_type and general.quantization_version
// set as llama.cpp sets them, tensors in the input's order.
absl::Status QuantizeModel(const GgufFile& in, const std::string& out_path,
                           const QuantizeOptions& options);

}  // namespace tessera::quantize
