// The chat template engine on small templates, one feature each, against Python jinja2's
// output (tests/data/template-snippets-expected.json, from tests/template-reference/), plus
// syntax errors, limits and robustness on malformed input.
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/template/chat_template.h"
#include "nlohmann/json.hpp"

namespace tessera {
namespace {

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

const std::string kRoot = TESSERA_SOURCE_DIR;

TEST(TemplateEngine, SnippetsMatchPythonJinja2) {
  auto spec = nlohmann::ordered_json::parse(ReadFile(kRoot + "/tests/template-reference/snippets.json"));
  auto expected = nlohmann::ordered_json::parse(ReadFile(kRoot + "/tests/data/template-snippets-expected.json"));
  const auto& snippets = expected["snippets"];
  ASSERT_EQ(snippets.size(), spec["snippets"].size());
  int same = 0;
  for (const auto& want : snippets) {
    const std::string source = want["template"];
    auto t = ChatTemplate::Parse(source);
    if (want.contains("parse_error")) {
      EXPECT_FALSE(t.ok()) << source;
      continue;
    }
    ASSERT_TRUE(t.ok()) << source << ": " << t.status();
    auto got = t->Render(spec["context"], TemplateLimits{}, FixedClock());
    if (want.contains("output")) {
      ASSERT_TRUE(got.ok()) << source << ": " << got.status();
      EXPECT_EQ(*got, want["output"].get<std::string>()) << source;
      same += *got == want["output"].get<std::string>();
    } else {
      ASSERT_FALSE(got.ok()) << source << " rendered " << *got;
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
      std::string msg = want.contains("raise") ? want["raise"] : want["error"];
      EXPECT_EQ(got.status().message(), msg) << source;
      same += got.status().message() == msg;
    }
  }
  std::printf("snippets identical to jinja2: %d of %zu\n", same, snippets.size());
}

TEST(TemplateEngine, SyntaxErrorsFailAtParseNamingTheLine) {
  auto expected = nlohmann::json::parse(ReadFile(kRoot + "/tests/data/template-snippets-expected.json"));
  for (const auto& bad : expected["bad_templates"]) {
    ASSERT_FALSE(bad.contains("parses")) << bad;
    auto t = ChatTemplate::Parse(bad["template"].get<std::string>());
    ASSERT_FALSE(t.ok()) << bad["template"];
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("line " + std::to_string(bad["line"].get<int>())), std::string::npos)
        << t.status() << " vs jinja2: " << bad["message"];
  }
  auto t = ChatTemplate::Parse("a\nb\n{% for x in y %}\n{{ x }\n{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 4"), std::string::npos) << t.status();
  t = ChatTemplate::Parse("{% if a %}\n\n{% for x in y %}{% endif %}");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 3"), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("endfor"), std::string::npos) << t.status();
}

TEST(TemplateEngine, StepLimitStopsLongRenders) {
  auto t = ChatTemplate::Parse("{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.status();
  TemplateLimits limits;
  limits.max_steps = 10'000;
  auto r = t->Render(nlohmann::json::object(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  limits.max_steps = 1'000'000;
  EXPECT_TRUE(t->Render(nlohmann::json::object(), limits).ok());
  // Endless recursion through a macro is bounded by the depth limit.
  auto rec = ChatTemplate::Parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(rec.ok());
  auto rr = rec->Render(nlohmann::json::object());
  ASSERT_FALSE(rr.ok());
  EXPECT_EQ(rr.status().code(), absl::StatusCode::kResourceExhausted) << rr.status();
}

TEST(TemplateEngine, OutputLimitStopsLargeRenders) {
  TemplateLimits limits;
  limits.max_output_bytes = 1000;
  auto t = ChatTemplate::Parse("{% for i in range(200) %}0123456789{% endfor %}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(nlohmann::json::object(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  limits.max_output_bytes = 2000;
  ASSERT_TRUE(t->Render(nlohmann::json::object(), limits).ok());
  // Strings built without printing count too.
  for (const char* src : {"{% set s = 'x' * 100000000000 %}", "{% set s = 'ab' * 1001 %}{{ s | length }}",
                          "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"}) {
    auto big = ChatTemplate::Parse(src);
    ASSERT_TRUE(big.ok()) << src;
    auto br = big->Render(nlohmann::json::object(), limits);
    ASSERT_FALSE(br.ok()) << src;
    EXPECT_EQ(br.status().code(), absl::StatusCode::kResourceExhausted) << src << br.status();
  }
}

TEST(TemplateEngine, DeepNestingIsAnErrorNotACrash) {
  std::string deep_expr = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_FALSE(ChatTemplate::Parse(deep_expr).ok());
  std::string deep_list = "{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}";
  EXPECT_FALSE(ChatTemplate::Parse(deep_list).ok());
  std::string deep_not = "{{ " + [] { std::string s; for (int i = 0; i < 100000; ++i) s += "not "; return s; }() + "1 }}";
  EXPECT_FALSE(ChatTemplate::Parse(deep_not).ok());
  std::string deep_if;
  for (int i = 0; i < 5000; ++i) deep_if += "{% if true %}";
  EXPECT_FALSE(ChatTemplate::Parse(deep_if).ok());
  // Values nested without bound inside a render.
  auto t = ChatTemplate::Parse(
      "{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(nlohmann::json::object());
  EXPECT_FALSE(r.ok());
  // A deeply nested context.
  nlohmann::json ctx = nlohmann::json::object();
  nlohmann::json* cur = &ctx;
  for (int i = 0; i < 100000; ++i) cur = &((*cur)["x"] = nlohmann::json::object());
  auto show = ChatTemplate::Parse("{{ x }}");
  ASSERT_TRUE(show.ok());
  EXPECT_FALSE(show->Render(ctx).ok());
}

// Chains parse in a loop but make trees as deep as they are long; freeing or rendering
// them must not exhaust the stack.
TEST(TemplateEngine, LongChainsAreAnErrorNotACrash) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  // Far past every depth limit (200 to parse, 256 to render) either way;
  // under AddressSanitizer a tenth as long, since it is some 100 times slower.
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kLong = 30000;
#else
  constexpr int kLong = 300000;
#endif
  const std::vector<std::string> chains = {
      "{{ 1" + repeat(" + 1", kLong) + " }}",   "{{ 'a'" + repeat(" ~ 'a'", kLong) + " }}",
      "{{ 1" + repeat(" or 1", kLong) + " }}",  "{{ x" + repeat(".a", kLong) + " }}",
      "{{ x" + repeat("[0]", kLong) + " }}",    "{{ x" + repeat("|e", kLong) + " }}",
      "{{ x" + repeat("()", kLong) + " }}",     "{{ 1" + repeat(" if 1", kLong) + " }}",
      "{{ 1" + repeat(" ** 1", kLong) + " }}",  "{{ 1" + repeat(" is number", kLong) + " }}",
  };
  for (const auto& src : chains) {
    auto t = ChatTemplate::Parse(src);
    if (t.ok()) {
      auto r = t->Render(nlohmann::json::object());
      EXPECT_FALSE(r.ok()) << src.substr(0, 20);
    }
    // An unfinished chain is freed while the parse fails.
    EXPECT_FALSE(ChatTemplate::Parse(src.substr(0, src.size() - 3) + " + }}").ok());
  }
}

// A list holding the same list twice, forty times over, is 2^40 items when printed,
// compared or used as a key: refused by the step limit rather than walked.
TEST(TemplateEngine, SharedValuesAreHeldToTheStepLimit) {
  const std::string grow =
      "{% set ns = namespace(s=[]) %}{% for i in range(40) %}{% set ns.s = [ns.s, ns.s] %}{% endfor %}";
  for (const std::string use : {"{{ ns.s }}", "{{ ns.s|string|length }}", "{{ ns.s == ns.s }}",
                                "{{ {ns.s: 1} }}", "{{ ns.s|tojson }}"}) {
    auto t = ChatTemplate::Parse(grow + use);
    ASSERT_TRUE(t.ok()) << use;
    auto r = t->Render(nlohmann::json::object());
    ASSERT_FALSE(r.ok()) << use;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << use << r.status();
  }
  // Twenty doublings (a million items) stay within the default limit.
  auto small = ChatTemplate::Parse(
      "{% set ns = namespace(s=[]) %}{% for i in range(20) %}{% set ns.s = [ns.s, ns.s] %}{% endfor %}"
      "{{ ns.s|length }}");
  ASSERT_TRUE(small.ok());
  auto r = small->Render(nlohmann::json::object());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "2");
}

TEST(TemplateEngine, MalformedTemplatesNeverCrash) {
  // Byte-level mutations of a real template: parsing and rendering must return, whatever
  // the input.
  std::string base = ReadFile(kRoot + "/tests/data/chat-templates/Qwen-Qwen3-0.6B.jinja");
  ASSERT_FALSE(base.empty());
  nlohmann::json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"add_generation_prompt", true}};
  std::mt19937 rng(12345);
  const std::string alphabet = "{}%#-+()[]|.,:'\"~=<>!*/ \nabcifnotse0123456789";
  int parsed = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::string s = base;
    int edits = 1 + rng() % 8;
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        case 1: if (pos < s.size()) s.erase(pos, 1 + rng() % 4); break;
        default: if (pos < s.size()) s[pos] = static_cast<char>(rng() % 256); break;
      }
    }
    auto t = ChatTemplate::Parse(s);
    if (!t.ok()) continue;
    ++parsed;
    TemplateLimits limits;
    limits.max_steps = 200'000;
    (void)t->Render(ctx, limits);
  }
  EXPECT_GT(parsed, 0);
}

TEST(TemplateEngine, CopiesShareTheParsedTemplate) {
  auto t = ChatTemplate::Parse("{{ bos_token }}{% for m in messages %}[{{ m.role }}]{% endfor %}");
  ASSERT_TRUE(t.ok());
  ChatTemplate copy = *t;
  ChatTemplate moved = std::move(*t);
  nlohmann::json ctx = {{"bos_token", "<s>"}, {"messages", {{{"role", "user"}}, {{"role", "assistant"}}}}};
  auto a = copy.Render(ctx);
  auto b = moved.Render(ctx);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_TRUE(copy.Render(nlohmann::json::array()).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
