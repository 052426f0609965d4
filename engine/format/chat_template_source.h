// Where a model's chat template text comes from.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/format/hf_model.h"

namespace tessera {

// The chat template of the model opened as `source` from `model_path`:
// the file `override_path` when it is not empty; else, for GGUF, the
// `tokenizer.chat_template` metadata string; else, for a Hugging Face folder,
// `chat_template.jinja` in the folder or `chat_template` in
// tokenizer_config.json (a string, or a list of {"name", "template"} of which
// "default" is taken). "" when the model has none. Unreadable or ill-typed
// sources are INVALID_ARGUMENT naming them.
absl::StatusOr<std::string> FindChatTemplate(const ModelSource& source,
                                             const std::string& model_path,
                                             const std::string& override_path);

}  // namespace tessera
