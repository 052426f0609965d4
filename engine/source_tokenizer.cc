#include "engine/source_tokenizer.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<Tokenizer>> OpenSourceTokenizer(const ModelSource& source) {
  if (source.format == "gguf") return Tokenizer::FromGguf(*source.file);
  auto tokenizer = Tokenizer::FromHuggingFace(source.tokenizer_json, source.tokenizer_config_json);
  if (!tokenizer.ok()) return tokenizer.status();
  (*tokenizer)->AddEndOfGenerationIds(source.eos_token_ids);
  return tokenizer;
}

}  // namespace tessera
