// Model folder formats: safetensors images, Hugging Face config.json,
// model.safetensors.index.json and tokenizer.json (+ tokenizer_config.json).
//
// Input: byte 0 picks the parser; the rest is the file. For tokenizer.json,
// the text after a line "#tokenizer_config.json" is the config file.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/format/hf_config.h"
#include "engine/format/safetensors.h"
#include "engine/tokenizer/tokenizer.h"
#include "fuzz_util.h"

namespace {

void Safetensors(std::string_view in) {
  auto file = tessera::SafetensorsFile::FromBytes(std::vector<uint8_t>(in.begin(), in.end()));
  if (!file.ok()) return;
  volatile uint8_t sink = 0;
  for (const auto& t : (*file)->tensors()) {
    tessera::fuzz::Check((*file)->Find(t.name) == &t, "Find finds each tensor");
    tessera::fuzz::Check(t.end >= t.begin, "tensor offsets are ordered");
    tessera::fuzz::Check((t.end - t.begin) == t.num_elements * tessera::SafetensorsDtypeSize(t.dtype),
                         "tensor size is its element count times the dtype size");
    // ASan reports a tensor whose bytes reach past the image.
    if (t.end > t.begin) sink = sink + t.data[0] + t.data[t.end - t.begin - 1];
  }
}

void HfConfig(std::string_view in) {
  auto config = tessera::ParseHfConfig(in);
  if (!config.ok()) return;
  tessera::fuzz::Check(config->metadata.count("general.architecture") == 1,
                       "a parsed config names its architecture");
}

void ShardIndex(std::string_view in) {
  auto index = tessera::ParseShardIndex(in);
  if (!index.ok()) return;
  for (const auto& [tensor, shard] : index->weight_map) {
    tessera::fuzz::Check(shard.find('/') == std::string::npos, "shard names are plain file names");
  }
}

void TokenizerJson(std::string_view in) {
  const auto [json, config] = tessera::fuzz::SplitOnce(in, "\n#tokenizer_config.json\n");
  auto tok = tessera::Tokenizer::FromHuggingFace(json, config);
  if (!tok.ok()) return;
  const auto ids = (*tok)->Encode("Hello, world! <s> \xc3\xa9\xe2\x96\x81 12345", {true, true});
  for (auto id : ids) {
    tessera::fuzz::Check(id >= 0 && id < (*tok)->vocab_size(), "encoded id within the vocabulary");
  }
  (void)(*tok)->Decode(ids);
  for (int32_t id = -1; id <= (*tok)->vocab_size() && id < 64; ++id) (void)(*tok)->Decode({&id, 1});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: Safetensors(in); break;
    case 1: HfConfig(in); break;
    case 2: ShardIndex(in); break;
    default: TokenizerJson(in); break;
  }
  return 0;
}
