// The safetensors shards, the index and the side files of a written folder.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/format/hf_tensors.h"
#include "engine/format/hf_writer.h"
#include "engine/model/rope_tensors.h"

namespace tessera {
namespace {

using json = nlohmann::json;

struct OutTensor {
  const HfTensorSpec* spec;
  const GgufTensorInfo* src;
};

std::string_view DtypeName(GgmlType t) {
  return t == GgmlType::kBF16 ? "BF16" : t == GgmlType::kF16 ? "F16" : "F32";
}

// The HF bytes of one tensor: GGUF's own, or an inverse-transformed copy.
const uint8_t* HfBytes(const HfModelConfig& m, const OutTensor& t, std::vector<uint8_t>& scratch) {
  const GgufTensorInfo& g = *t.src;
  switch (t.spec->transform) {
    case HfTransform::kNone:
      return g.data;
    case HfTransform::kPermuteQ:
    case HfTransform::kPermuteK: {
      scratch.resize(g.num_bytes);
      const uint32_t groups = t.spec->transform == HfTransform::kPermuteQ ? m.heads : m.kv_heads;
      PermuteRows(g.data, scratch.data(), g.dims[1], g.dims[0] * GgmlTypeSize(g.type), groups,
                  true);
      return scratch.data();
    }
    case HfTransform::kPlusOne: {
      scratch.resize(g.num_bytes);  // F32, checked by the caller
      for (uint64_t i = 0; i < g.num_elements; ++i) {
        float v;
        std::memcpy(&v, g.data + 4 * i, 4);
        v -= 1.0f;
        std::memcpy(scratch.data() + 4 * i, &v, 4);
      }
      return scratch.data();
    }
  }
  return g.data;
}

absl::Status WriteShard(const HfModelConfig& m, const std::string& path,
                        const std::vector<OutTensor>& tensors) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t at = 0;
  for (const OutTensor& t : tensors) {
    const std::vector<uint64_t> shape(t.src->dims.rbegin(), t.src->dims.rend());
    header[t.spec->hf_name] = {{"dtype", DtypeName(t.src->type)},
                               {"shape", shape},
                               {"data_offsets", {at, at + t.src->num_bytes}}};
    at += t.src->num_bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-aligned
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<uint8_t> scratch;
  for (const OutTensor& t : tensors) {
    const uint8_t* bytes = HfBytes(m, t, scratch);
    out.write(reinterpret_cast<const char*>(bytes), static_cast<std::streamsize>(t.src->num_bytes));
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OutTensor>> MatchTensors(const GgufFile& file,
                                                    const std::vector<HfTensorSpec>& specs) {
  std::vector<OutTensor> out;
  std::set<std::string, std::less<>> used;
  for (const HfTensorSpec& s : specs) {
    const GgufTensorInfo* t = file.FindTensor(s.gguf_name);
    if (t == nullptr) {
      if (s.optional) continue;
      return absl::InvalidArgumentError(absl::StrCat("model has no tensor '", s.gguf_name, "'"));
    }
    if (t->dims != s.dims || (s.transform == HfTransform::kPlusOne && t->type != GgmlType::kF32)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", s.gguf_name, "' does not have the shape or type expected"));
    }
    used.insert(s.gguf_name);
    out.push_back({&s, t});
  }
  for (const GgufTensorInfo& t : file.tensors()) {
    // config.json's rope_scaling stands for these (HfConfigFromGguf refuses
    // factors it cannot express that way).
    if (IsRopeFactorTensor(t.name)) continue;
    if (!used.count(t.name)) {
      return absl::UnimplementedError(
          absl::StrCat("tensor '", t.name, "' has no Hugging Face counterpart here"));
    }
  }
  return out;
}

absl::Status CopyFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot copy ", from, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteHfTensors(const GgufFile& file, const HfModelConfig& m, const std::string& dir,
                            uint64_t shard_size) {
  const std::vector<HfTensorSpec> specs = HfTensorSpecs(m);
  auto tensors = MatchTensors(file, specs);
  if (!tensors.ok()) return tensors.status();
  if (shard_size == 0) return WriteShard(m, dir + "/model.safetensors", *tensors);
  std::vector<std::vector<OutTensor>> shards(1);
  uint64_t bytes = 0, total = 0;
  for (const OutTensor& t : *tensors) {
    if (!shards.back().empty() && bytes + t.src->num_bytes > shard_size) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(t);
    bytes += t.src->num_bytes;
    total += t.src->num_bytes;
  }
  json weight_map = json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        absl::StrFormat("model-%05d-of-%05d.safetensors", i + 1, shards.size());
    for (const OutTensor& t : shards[i]) weight_map[t.spec->hf_name] = name;
    if (auto s = WriteShard(m, dir + "/" + name, shards[i]); !s.ok()) return s;
  }
  std::ofstream out(dir + "/model.safetensors.index.json");
  out << json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError("cannot write model.safetensors.index.json");
  return absl::OkStatus();
}

absl::Status WriteHfSideFiles(const GgufFile& file, const std::string& dir,
                              const HfWriteOptions& options) {
  json gen = {{"_from_model_config", true}};
  // The vocabulary's BOS and EOS ids, unless a tokenizer.json comes with the
  // folder: its tokenizer_config.json names them, and the ids of the model's
  // own (placeholder) vocabulary would mean other tokens there.
  if (options.tokenizer_json.empty()) {
    for (const auto& [key, hf] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token_id"},
                                  {"tokenizer.ggml.eos_token_id", "eos_token_id"}}) {
      if (auto v = file.GetUint(key); v.ok()) gen[hf] = *v;
    }
  }
  std::ofstream out(dir + "/generation_config.json");
  out << gen.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError("cannot write generation_config.json");
  if (!options.tokenizer_json.empty()) {
    if (auto s = CopyFile(options.tokenizer_json, dir + "/tokenizer.json"); !s.ok()) return s;
  }
  if (!options.tokenizer_config.empty()) {
    auto s = CopyFile(options.tokenizer_config, dir + "/tokenizer_config.json");
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tessera
