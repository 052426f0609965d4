#include "engine/format/json_strict.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// Walks the document once, checking keys and depth; builds nothing.
class StrictChecker : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (!Push()) return false;
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second) {
      error = absl::StrCat("duplicate key \"", k, "\" at depth ", depth_);
      return false;
    }
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return Push(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    error = absl::StrCat("invalid JSON at byte ", position, ": ", ex.what());
    return false;
  }

  std::string error;

 private:
  bool Push() {
    if (++depth_ > kMaxJsonDepth) {
      error = absl::StrCat("nesting deeper than ", kMaxJsonDepth, " levels");
      return false;
    }
    return true;
  }
  int depth_ = 0;
  std::vector<std::set<std::string>> keys_;
};

}  // namespace

absl::StatusOr<json> ParseJsonStrict(std::string_view text, std::string_view what) {
  StrictChecker checker;
  const bool ok = json::sax_parse(text.begin(), text.end(), &checker, json::input_format_t::json,
                                  /*strict=*/true);
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), ": ",
                     checker.error.empty() ? std::string("invalid JSON") : checker.error));
  }
  // Checked above, so this parse cannot fail.
  return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

}  // namespace tessera
