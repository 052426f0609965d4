#include "tools/quantize/quantize_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/float16.h"
#include "engine/quant/quant.h"

namespace tessera::quantize {
namespace {

// llama.cpp's GGML_QNT_VERSION, written as general.quantization_version.
constexpr uint32_t kQuantizationVersion = 2;
// Rows are handed to workers in chunks of at least this many elements.
constexpr uint64_t kChunkElems = 32 * 512;

bool IsSplitKey(const std::string& key) {
  return key == "split.no" || key == "split.count" || key == "split.tensors.count";
}

// <arch>.block_count, or the number of distinct blk.N indices without it.
int LayerCount(const GgufFile& in) {
  const absl::StatusOr<std::string> arch = in.GetString("general.architecture");
  if (arch.ok()) {
    const absl::StatusOr<uint64_t> n = in.GetUint(*arch + ".block_count");
    if (n.ok() && *n < (1u << 20)) return static_cast<int>(*n);
  }
  std::set<int> layers;
  for (const GgufTensorInfo& t : in.tensors()) {
    int layer = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1) layers.insert(layer);
  }
  return static_cast<int>(layers.size());
}

void RowToFloat(const uint8_t* src, GgmlType type, float* dst, uint64_t n) {
  if (type == GgmlType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = type == GgmlType::kF16 ? HalfToFloat(h) : Bf16ToFloat(h);
  }
}

// Writes a row of floats as out_type: a quantized type, or F16 / F32.
void RowFromFloat(const float* src, uint32_t out_type, uint8_t* dst, uint64_t n) {
  if (const std::optional<quant::QuantType> qt = quant::QuantTypeFromGgml(out_type)) {
    quant::QuantizeRow(*qt, src, dst, static_cast<int64_t>(n));
  } else if (out_type == quant::kGgmlF16) {
    for (uint64_t i = 0; i < n; ++i) {
      const uint16_t h = FloatToHalf(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
}

uint64_t OutRowBytes(uint32_t out_type, uint64_t row) {
  if (const std::optional<quant::QuantType> qt = quant::QuantTypeFromGgml(out_type)) {
    return static_cast<uint64_t>(quant::RowBytes(*qt, static_cast<int64_t>(row)));
  }
  return row * (out_type == quant::kGgmlF16 ? 2 : 4);
}

// Elements done across the model, reported to on_progress one call at a time.
class Progress {
 public:
  Progress(const QuantizeOptions& options, uint64_t total) : options_(options), total_(total) {}
  void Add(uint64_t elems) {
    const uint64_t done = done_.fetch_add(elems) + elems;
    if (!options_.on_progress) return;
    std::lock_guard<std::mutex> lock(mu_);
    options_.on_progress(done, total_);
  }

 private:
  const QuantizeOptions& options_;
  const uint64_t total_;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
};

// Converts one tensor's rows into out[0, size), `threads` workers taking
// chunks of rows in turn.
absl::Status ConvertTensor(const GgufTensorInfo& t, uint32_t out_type, int threads,
                           Progress& progress, uint8_t* out, size_t size) {
  const uint64_t row = t.dims[0];
  const uint64_t rows = t.num_elements / row;
  const uint64_t in_row_bytes = row * GgmlTypeSize(t.type);
  const uint64_t out_row_bytes = OutRowBytes(out_type, row);
  if (out_row_bytes * rows != size || in_row_bytes * rows != t.num_bytes) {
    return absl::InternalError(absl::StrCat("tensor '", t.name, "': size mismatch"));
  }
  const std::optional<quant::QuantType> qt = quant::QuantTypeFromGgml(out_type);
  if (qt && !quant::CanQuantize(*qt)) {  // read-only types: no plan asks for them
    return absl::InternalError(absl::StrCat("tensor '", t.name, "': cannot write ",
                                            std::string(quant::Info(*qt).name)));
  }
  const uint64_t chunk_rows = std::max<uint64_t>(1, kChunkElems / row);
  std::atomic<uint64_t> next{0};
  // The first row (lowest index seen) holding a NaN or an infinity, if any.
  std::atomic<uint64_t> bad_row{rows};
  auto work = [&] {
    std::vector<float> buf(row);
    for (;;) {
      const uint64_t first = next.fetch_add(chunk_rows);
      if (first >= rows || bad_row.load() < rows) return;
      const uint64_t last = std::min(rows, first + chunk_rows);
      for (uint64_t r = first; r < last; ++r) {
        RowToFloat(t.data + r * in_row_bytes, t.type, buf.data(), row);
        if (!std::all_of(buf.begin(), buf.end(), [](float v) { return std::isfinite(v); })) {
          uint64_t seen = bad_row.load();
          while (r < seen && !bad_row.compare_exchange_weak(seen, r)) {
          }
          return;
        }
        RowFromFloat(buf.data(), out_type, out + r * out_row_bytes, row);
      }
      progress.Add((last - first) * row);
    }
  };
  const uint64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  const int n = static_cast<int>(std::min<uint64_t>(std::max(threads, 1), chunks));
  std::vector<std::thread> workers;
  for (int i = 1; i < n; ++i) workers.emplace_back(work);
  work();
  for (std::thread& w : workers) w.join();
  if (bad_row.load() < rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", t.name, "' row ", bad_row.load(), " holds a NaN or infinity"));
  }
  return absl::OkStatus();
}

absl::Status CheckInputTypes(const GgufFile& in) {
  for (const GgufTensorInfo& t : in.tensors()) {
    if (t.type != GgmlType::kF32 && t.type != GgmlType::kF16 && t.type != GgmlType::kBF16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", t.name, "' is already ",
          std::string(quant::GgmlTypeNameOf(static_cast<uint32_t>(t.type))),
          "; tessera-quantize reads f32, f16 and bf16 models"));
    }
    if (t.dims.empty() || t.dims[0] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has no rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status QuantizeModel(const GgufFile& in, const std::string& out_path,
                           const QuantizeOptions& options) {
  if (absl::Status s = CheckInputTypes(in); !s.ok()) return s;
  std::vector<quant::PlanTensor> plan_in;
  for (const GgufTensorInfo& t : in.tensors()) {
    plan_in.push_back({t.name, t.dims, static_cast<uint32_t>(t.type)});
  }
  const std::vector<quant::PlannedType> plan =
      quant::PlanQuantization(options.mix, plan_in, LayerCount(in));

  GgufWriter writer;
  for (const auto& [key, value] : in.metadata()) {
    if (!IsSplitKey(key)) writer.SetValue(key, value);
  }
  if (options.add_metadata) options.add_metadata(writer);
  writer.SetUint32("general.quantization_version", kQuantizationVersion);
  writer.SetUint32("general.file_type", static_cast<uint32_t>(options.mix));

  uint64_t total = 0;
  for (const GgufTensorInfo& t : in.tensors()) total += t.num_elements;
  auto progress = std::make_shared<Progress>(options, total);
  const size_t count = in.tensors().size();
  for (size_t i = 0; i < count; ++i) {
    const GgufTensorInfo* t = &in.tensors()[i];
    const quant::PlannedType planned = plan[i];
    const TensorEvent event{i, count, t, planned.ggml_type, planned.fallback};
    auto produce = [t, planned, event, progress, &options](uint8_t* out,
                                                           size_t size) -> absl::Status {
      if (options.on_tensor) options.on_tensor(event);
      if (planned.ggml_type == static_cast<uint32_t>(t->type)) {
        if (size != t->num_bytes) return absl::InternalError("copied tensor size mismatch");
        std::memcpy(out, t->data, size);
        progress->Add(t->num_elements);
        return absl::OkStatus();
      }
      return ConvertTensor(*t, planned.ggml_type, options.threads, *progress, out, size);
    };
    writer.AddTensorStreamed(t->name, t->dims, static_cast<GgmlType>(planned.ggml_type),
                             std::move(produce));
  }
  return writer.WriteFile(out_path, in.alignment());
}

}  // namespace tessera::quantize
