// The one registry of CCL_* variables (docs/environment.md is made from it). Each variable is
// declared once in config_table.cc with its type, default and a one-line doc; `ccl-info --env`
// prints them all. Values are read from the environment at each call (cheap: callers cache what
// they need at communicator init), so tests may setenv() between communicators.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ccl {

enum class ConfigType { Int, Bool, String, Bytes };

struct ConfigVar {
  const char* name;
  ConfigType type;
  const char* default_value;  // as the user would write it; "" = unset
  const char* doc;
};

const std::vector<ConfigVar>& config_vars();

// Lookups by name; the name must be in the table (InternalError otherwise). A malformed value
// throws InvalidUsage naming the variable and the value.
int64_t config_int(const char* name);  // Int, Bool and Bytes (K/M/G suffixes) variables
bool config_bool(const char* name);    // 1/0, true/false, yes/no, on/off
std::string config_string(const char* name);
bool config_is_set(const char* name);  // set in the environment (even if empty)

// Parsers, exposed for tests and fuzzers. Return false on malformed input.
bool parse_int(const std::string& text, int64_t* out);
bool parse_bytes(const std::string& text, int64_t* out);  // "4096", "64K", "4M", "1G"
bool parse_bool(const std::string& text, bool* out);

}  // namespace ccl
