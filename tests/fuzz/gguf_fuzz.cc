// GGUF reader: arbitrary bytes through GgufFile::FromBytes, then every typed
// getter over each key that parsed, the tensor table (every byte a tensor
// claims must lie inside the image) and a tokenizer from the metadata.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "fuzz_util.h"

namespace {

using tessera::GgufFile;

void ExerciseGetters(const GgufFile& file) {
  for (const auto& [key, value] : file.metadata()) {
    tessera::fuzz::Check(file.FindValue(key) == &value, "FindValue finds each key");
    (void)file.GetUint(key);
    (void)file.GetInt(key);
    (void)file.GetFloat(key);
    (void)file.GetBool(key);
    (void)file.GetString(key);
    (void)file.GetStringArray(key);
    (void)file.GetFloatArray(key);
    (void)file.GetIntArray(key);
    (void)file.GetUintOr(key, 1);
    (void)file.GetFloatOr(key, 1.0);
    (void)file.GetBoolOr(key, true);
    (void)file.GetStringOr(key, "x");
  }
  (void)file.GetUint("missing.key");
  (void)file.GetStringOr("missing.key", "fallback");
}

void ExerciseTensors(const GgufFile& file) {
  volatile uint8_t sink = 0;
  for (const auto& t : file.tensors()) {
    tessera::fuzz::Check(file.FindTensor(t.name) == &t, "FindTensor finds each tensor");
    auto bytes = tessera::GgmlTensorBytes(t.dims, t.type);
    tessera::fuzz::Check(bytes.ok() && *bytes == t.num_bytes, "tensor size is consistent");
    // ASan reports a tensor whose bytes reach past the image.
    if (t.num_bytes > 0) sink = sink + t.data[0] + t.data[t.num_bytes - 1];
  }
}

void ExerciseTokenizer(const GgufFile& file) {
  auto tokenizer = tessera::Tokenizer::FromGguf(file);
  if (!tokenizer.ok()) return;
  const auto& tok = **tokenizer;
  const auto ids = tok.Encode("Hello world <s> \xe2\x96\x81 \xc3\xa9", {true, true});
  for (auto id : ids) tessera::fuzz::Check(id >= 0 && id < tok.vocab_size(), "encoded id in vocab");
  (void)tok.Decode(ids);
  for (int32_t id = -1; id <= tok.vocab_size() && id < 64; ++id) (void)tok.Decode({&id, 1});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::FromBytes(std::vector<uint8_t>(data, data + size));
  if (!file.ok()) return 0;
  ExerciseGetters(**file);
  ExerciseTensors(**file);
  ExerciseTokenizer(**file);
  return 0;
}
