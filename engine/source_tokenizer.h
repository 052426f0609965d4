// The tokenizer of an opened model (see OpenModelSource): a GGUF file's
// vocabulary from its metadata; a Hugging Face folder's tokenizer.json and
// tokenizer_config.json, with generation_config.json's end-of-generation ids.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/format/hf_model.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<Tokenizer>> OpenSourceTokenizer(const ModelSource& source);

}  // namespace tessera
