// Renders every chat template of tests/data/chat-templates/ with every conversation of
// tests/template-reference/conversations.json and compares with Python jinja2's output
// (tests/data/chat-template-expected/, written by tests/template-reference/render_reference.py).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "engine/template/chat_template.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fixed clock of render_reference.py: 2024-07-26 13:45:30 (a Friday).
RenderOptions FixedClock() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 13;
  tm.tm_min = 45;
  tm.tm_sec = 30;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  return RenderOptions{tm};
}

TEST(TemplateConformance, MatchesPythonJinja2) {
  const fs::path root = TESSERA_SOURCE_DIR;
  const fs::path templates = root / "tests/data/chat-templates";
  const fs::path expected_dir = root / "tests/data/chat-template-expected";
  nlohmann::ordered_json corpus = nlohmann::ordered_json::parse(ReadFile(root / "tests/template-reference/conversations.json"));
  const nlohmann::ordered_json special = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"},
                                  {"pad_token", "<pad>"}};
  int pairs = 0, outputs_ok = 0, errors_ok = 0, error_text_same = 0, templates_all_ok = 0, template_count = 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(templates)) {
    if (e.path().extension() == ".jinja") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 60u);
  for (const auto& path : files) {
    ++template_count;
    const std::string stem = path.stem().string();
    nlohmann::ordered_json expected = nlohmann::ordered_json::parse(ReadFile(expected_dir / (stem + ".json")));
    auto tmpl = ChatTemplate::Parse(ReadFile(path));
    if (expected.contains("parse_error")) {
      EXPECT_FALSE(tmpl.ok()) << stem << " parses but jinja2 says " << expected["parse_error"];
      continue;
    }
    ASSERT_TRUE(tmpl.ok()) << stem << ": " << tmpl.status();
    bool all_ok = true;
    for (const auto& conv : corpus["conversations"]) {
      ++pairs;
      const std::string name = conv["name"];
      nlohmann::ordered_json ctx = special;
      ctx.update(conv["context"]);
      if (conv.value("tools", false)) ctx["tools"] = corpus["tools_weather"];
      const nlohmann::ordered_json& want = expected["conversations"][name];
      auto got = tmpl->Render(ctx, TemplateLimits{}, FixedClock());
      if (want.contains("output")) {
        if (got.ok() && *got == want["output"].get<std::string>()) {
          ++outputs_ok;
          continue;
        }
        all_ok = false;
        ADD_FAILURE() << stem << " / " << name << ": "
                      << (got.ok() ? "output differs:\n--- got ---\n" + *got + "\n--- want ---\n" +
                                         want["output"].get<std::string>()
                                   : "render failed: " + got.status().ToString());
      } else {
        const std::string msg = want.contains("raise") ? want["raise"].get<std::string>()
                                                       : want["error"].get<std::string>();
        if (!got.ok() && got.status().code() == absl::StatusCode::kInvalidArgument) {
          ++errors_ok;
          if (std::string(got.status().message()) == msg) ++error_text_same;
          // The template's own raise_exception message must come through unchanged.
          if (want.contains("raise")) {
            EXPECT_EQ(got.status().message(), msg) << stem << " / " << name;
          }
          continue;
        }
        all_ok = false;
        ADD_FAILURE() << stem << " / " << name << ": expected error '" << msg << "', got "
                      << (got.ok() ? "output:\n" + *got : got.status().ToString());
      }
    }
    if (all_ok) ++templates_all_ok;
  }
  std::printf("templates %d (all conversations match: %d); pairs %d: outputs identical %d, "
              "errors as in jinja2 %d (same message %d)\n",
              template_count, templates_all_ok, pairs, outputs_ok, errors_ok, error_text_same);
}

}  // namespace
}  // namespace tessera
