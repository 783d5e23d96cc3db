#include "base/config.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace ccl {

namespace {

const ConfigVar& find_var(const char* name) {
  for (const auto& var : config_vars()) {
    if (strcmp(var.name, name) == 0) return var;
  }
  throw_error(cclInternalError, "config: %s is not in the registry (config_table.cc)", name);
}

// The environment's value, else the default.
std::string raw_value(const ConfigVar& var) {
  const char* env = getenv(var.name);
  return env != nullptr ? std::string(env) : std::string(var.default_value);
}

}  // namespace

bool parse_int(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long value = strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *out = value;
  return true;
}

bool parse_bytes(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  std::string digits = text;
  int64_t scale = 1;
  switch (digits.back()) {
    case 'k':
    case 'K':
      scale = int64_t{1} << 10;
      break;
    case 'm':
    case 'M':
      scale = int64_t{1} << 20;
      break;
    case 'g':
    case 'G':
      scale = int64_t{1} << 30;
      break;
    default:
      break;
  }
  if (scale != 1) digits.pop_back();
  int64_t value = 0;
  if (!parse_int(digits, &value) || value < 0) return false;
  if (value > INT64_MAX / scale) return false;
  *out = value * scale;
  return true;
}

bool parse_bool(const std::string& text, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* word : kTrue) {
    if (strcasecmp(text.c_str(), word) == 0) return *out = true, true;
  }
  for (const char* word : kFalse) {
    if (strcasecmp(text.c_str(), word) == 0) return *out = false, true;
  }
  return false;
}

int64_t config_int(const char* name) {
  const ConfigVar& var = find_var(name);
  std::string text = raw_value(var);
  int64_t value = 0;
  bool ok = false;
  switch (var.type) {
    case ConfigType::Int:
      ok = parse_int(text, &value);
      break;
    case ConfigType::Bytes:
      ok = parse_bytes(text, &value);
      break;
    case ConfigType::Bool: {
      bool flag = false;
      ok = parse_bool(text, &flag);
      value = flag ? 1 : 0;
      break;
    }
    case ConfigType::String:
      throw_error(cclInternalError, "config: %s is a string, not a number", name);
  }
  if (!ok) throw_error(cclInvalidUsage, "%s=\"%s\" is not valid: %s", name, text.c_str(), var.doc);
  return value;
}

bool config_bool(const char* name) { return config_int(name) != 0; }

std::string config_string(const char* name) { return raw_value(find_var(name)); }

bool config_is_set(const char* name) { return getenv(find_var(name).name) != nullptr; }

}  // namespace ccl
