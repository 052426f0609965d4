#include "engine/format/chat_template_source.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "engine/model/gguf.h"

namespace tessera {
namespace {

// Chat templates are a few KiB; a file far larger is surely not one.
constexpr size_t kMaxTemplateBytes = 4 << 20;

absl::StatusOr<std::string> ReadTemplateFile(const std::string& path, bool must_exist) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!must_exist) return std::string();
    return absl::InvalidArgumentError(absl::StrCat("cannot read chat template ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxTemplateBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template ", path, " is larger than ", kMaxTemplateBytes, " bytes"));
  }
  return text.str();
}

// tokenizer_config.json's "chat_template": a string, or named templates.
absl::StatusOr<std::string> FromTokenizerConfig(const std::string& config_text) {
  if (config_text.empty()) return std::string();
  nlohmann::json config = nlohmann::json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return std::string();  // the tokenizer reports a bad file
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const nlohmann::json& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
  }
  return absl::InvalidArgumentError(
      "tokenizer_config.json chat_template must be a string or a list holding a \"default\" "
      "template");
}

// chat_template.json, which processors of multimodal models save (Gemma 3
// 4B and up): {"chat_template": string}. "" when the file is absent.
absl::StatusOr<std::string> FromChatTemplateJson(const std::string& path) {
  auto text = ReadTemplateFile(path, /*must_exist=*/false);
  if (!text.ok() || text->empty()) return text;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " must be a JSON object with a string \"chat_template\""));
  }
  return j["chat_template"].get<std::string>();
}

}  // namespace

absl::StatusOr<std::string> FindChatTemplate(const ModelSource& source,
                                             const std::string& model_path,
                                             const std::string& override_path) {
  if (!override_path.empty()) return ReadTemplateFile(override_path, /*must_exist=*/true);
  if (source.format == "gguf") {
    if (source.file == nullptr) return std::string();
    const GgufValue* value = source.file->FindValue("tokenizer.chat_template");
    if (value == nullptr) return std::string();
    const auto* text = std::get_if<std::string>(&value->value);
    if (text == nullptr) {
      return absl::InvalidArgumentError("GGUF tokenizer.chat_template must be a string");
    }
    return *text;
  }
  // transformers' order: chat_template.jinja, chat_template.json, then
  // tokenizer_config.json.
  auto file = ReadTemplateFile(model_path + "/chat_template.jinja", /*must_exist=*/false);
  if (!file.ok() || !file->empty()) return file;
  auto json = FromChatTemplateJson(model_path + "/chat_template.json");
  if (!json.ok() || !json->empty()) return json;
  return FromTokenizerConfig(source.tokenizer_config_json);
}

}  // namespace tessera
