#include "engine/format/hf_model.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/format/hf_config.h"
#include "engine/format/hf_tensors.h"
#include "engine/format/json_strict.h"
#include "engine/format/safetensors.h"

namespace tessera {
namespace {

// Small JSON files above this size are refused (tokenizer.json of large
// vocabularies is ~10-30 MB).
constexpr int64_t kMaxJsonFileBytes = 256 << 20;

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("'", path, "' is not a readable file"));
  }
  if (st.st_size > kMaxJsonFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is larger than ", kMaxJsonFileBytes, " bytes"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return absl::DataLossError(absl::StrCat("cannot read '", path, "'"));
  return ss.str();
}

using Sources = std::map<std::string, HfSourceTensor, std::less<>>;

absl::Status AddShard(const std::string& dir, const std::string& name, Sources& sources,
                      std::vector<std::shared_ptr<const void>>& owners,
                      std::vector<std::shared_ptr<SafetensorsFile>>& opened) {
  auto file = SafetensorsFile::Open(dir + "/" + name);
  if (!file.ok()) return file.status();
  std::shared_ptr<SafetensorsFile> shard = std::move(*file);
  for (const SafetensorsTensor& t : shard->tensors()) {
    auto [it, added] = sources.emplace(t.name, HfSourceTensor{&t, name});
    if (!added) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", t.name, "\" is in both ", it->second.shard, " and ", name));
    }
  }
  owners.push_back(shard);
  opened.push_back(shard);
  return absl::OkStatus();
}

// Opens the shards the index lists and checks that each holds exactly the
// tensors the index assigns to it.
absl::Status OpenSharded(const std::string& dir, Sources& sources,
                         std::vector<std::shared_ptr<const void>>& owners) {
  auto text = ReadText(dir + "/model.safetensors.index.json");
  if (!text.ok()) return text.status();
  auto index = ParseShardIndex(*text);
  if (!index.ok()) return index.status();
  std::vector<std::shared_ptr<SafetensorsFile>> opened;
  for (const std::string& shard : index->shards) {
    if (!IsFile(dir + "/" + shard)) {
      return absl::NotFoundError(
          absl::StrCat("index: shard \"", shard, "\" is missing from ", dir));
    }
    if (auto s = AddShard(dir, shard, sources, owners, opened); !s.ok()) return s;
  }
  for (const auto& [tensor, src] : sources) {
    auto it = index->weight_map.find(tensor);
    if (it == index->weight_map.end() || it->second != src.shard) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor \"", tensor, "\" is in ", src.shard, " but the index lists it ",
          it == index->weight_map.end() ? std::string("nowhere") : "in " + it->second));
    }
  }
  for (const auto& [tensor, shard] : index->weight_map) {
    if (!sources.count(tensor)) {
      return absl::InvalidArgumentError(
          absl::StrCat("index lists tensor \"", tensor, "\" in ", shard, ", which lacks it"));
    }
  }
  return absl::OkStatus();
}

// A Gemma 3 multimodal checkpoint's text model under the names of a text
// checkpoint; the vision tower and projector are left out.
absl::StatusOr<Sources> TextModelSources(Sources sources) {
  Sources text;
  for (auto& [name, src] : sources) {
    const std::string renamed = Gemma3TextTensorName(name);
    if (renamed.empty()) continue;
    if (!text.emplace(renamed, src).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", name, "\" duplicates \"", renamed, "\""));
    }
  }
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> OpenHfWeights(const std::string& dir) {
  auto config_text = ReadText(dir + "/config.json");
  if (!config_text.ok()) return config_text.status();
  auto config = ParseHfConfig(*config_text);
  if (!config.ok()) return config.status();
  Sources sources;
  std::vector<std::shared_ptr<const void>> owners;
  if (IsFile(dir + "/model.safetensors.index.json")) {
    if (auto s = OpenSharded(dir, sources, owners); !s.ok()) return s;
  } else if (IsFile(dir + "/model.safetensors")) {
    std::vector<std::shared_ptr<SafetensorsFile>> opened;
    if (auto s = AddShard(dir, "model.safetensors", sources, owners, opened); !s.ok()) return s;
  } else {
    return absl::NotFoundError(
        absl::StrCat(dir, " has neither model.safetensors nor model.safetensors.index.json"));
  }
  if (config->gemma3_multimodal) {
    auto text = TextModelSources(std::move(sources));
    if (!text.ok()) return text.status();
    sources = *std::move(text);
  }
  return BuildHfGguf(*config, sources, std::move(owners));
}

absl::StatusOr<std::vector<int32_t>> ParseGenerationEos(std::string_view json_text) {
  auto doc = ParseJsonStrict(json_text, "generation_config.json");
  if (!doc.ok()) return doc.status();
  if (!doc->is_object())
    return absl::InvalidArgumentError("generation_config.json is not an object");
  std::vector<int32_t> out;
  if (!doc->contains("eos_token_id") || (*doc)["eos_token_id"].is_null()) return out;
  const nlohmann::json& v = (*doc)["eos_token_id"];
  auto add = [&](const nlohmann::json& e) -> absl::Status {
    if (!e.is_number_unsigned() || e.get<uint64_t>() > (1u << 30)) {
      return absl::InvalidArgumentError(absl::StrCat("generation_config.json eos_token_id entry ",
                                                     e.dump(), " is not a token id"));
    }
    out.push_back(static_cast<int32_t>(e.get<uint64_t>()));
    return absl::OkStatus();
  };
  if (v.is_array()) {
    for (const auto& e : v) {
      if (auto s = add(e); !s.ok()) return s;
    }
  } else if (auto s = add(v); !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<ModelSource> OpenModelSource(const std::string& path) {
  ModelSource src;
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    auto file = GgufFile::Open(path);
    if (!file.ok()) return file.status();
    src.file = std::move(*file);
    src.format = "gguf";
    return src;
  }
  src.format = "hf";
  auto file = OpenHfWeights(path);
  if (!file.ok())
    return absl::Status(file.status().code(), absl::StrCat(path, ": ", file.status().message()));
  src.file = std::move(*file);
  auto tokenizer = ReadText(path + "/tokenizer.json");
  if (!tokenizer.ok()) return tokenizer.status();
  src.tokenizer_json = std::move(*tokenizer);
  if (IsFile(path + "/tokenizer_config.json")) {
    auto text = ReadText(path + "/tokenizer_config.json");
    if (!text.ok()) return text.status();
    src.tokenizer_config_json = std::move(*text);
  }
  if (IsFile(path + "/generation_config.json")) {
    auto text = ReadText(path + "/generation_config.json");
    if (!text.ok()) return text.status();
    auto eos = ParseGenerationEos(*text);
    if (!eos.ok()) return eos.status();
    src.eos_token_ids = std::move(*eos);
  }
  return src;
}

}  // namespace tessera
