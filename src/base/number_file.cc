// read_number_file: one parser for every "key value" file, so that all of them accept and refuse
// the same lines with the same messages.
#include "base/number_file.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace ccl {

namespace {

// The next whitespace-separated token of `rest`, which moves past it.
std::string_view next_token(std::string_view& rest) {
  const size_t begin = rest.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(begin);
  const size_t end = std::min(rest.find_first_of(" \t\r"), rest.size());
  const std::string_view token = rest.substr(0, end);
  rest.remove_prefix(end);
  return token;
}

}  // namespace

void read_number_file(const std::string& path, const char* what, std::span<const char* const> keys,
                      const std::function<const char*(size_t key, double value)>& set) {
  std::ifstream in(path);
  if (!in)
    throw_error(cclInvalidArgument, "%s %s: cannot open: %s", what, path.c_str(), strerror(errno));
  std::string valid;
  for (const char* key : keys) valid += std::string(valid.empty() ? "" : " ") + key;
  std::vector<bool> seen(keys.size(), false);
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    std::string_view rest = text;
    rest = rest.substr(0, rest.find('#'));
    const std::string_view key = next_token(rest);
    if (key.empty()) continue;
    const std::string_view value = next_token(rest);
    const auto fail = [&](const std::string& why) {
      throw_error(cclInvalidArgument, "%s:%d: key '%.*s': %s in '%s'", path.c_str(), number,
                  static_cast<int>(key.size()), key.data(), why.c_str(), text.c_str());
    };
    size_t k = 0;
    while (k < keys.size() && key != keys[k]) ++k;
    if (k == keys.size()) fail("unknown key (valid: " + valid + ")");
    if (seen[k]) fail("repeated key");
    seen[k] = true;
    if (value.empty()) fail("missing value");
    if (!next_token(rest).empty()) fail("more than one value");
    double v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || end != value.data() + value.size()) fail("not a number");
    if (!std::isfinite(v)) fail("not a finite number");
    if (const char* why = set(k, v)) fail(why);
  }
  if (in.bad())
    throw_error(cclInvalidArgument, "%s %s: read error: %s", what, path.c_str(), strerror(errno));
}

}  // namespace ccl
