// printf into a std::string, for the simulator's reports (cluster descriptions, --explain).
#pragma once

#include <cstdio>
#include <string>

namespace ccl::sim {

// Lines longer than 255 characters are cut: every caller formats one short line.
inline std::string printf_string(const char* fmt, auto... args) {
  char text[256];
  std::snprintf(text, sizeof(text), fmt, args...);
  return text;
}

}  // namespace ccl::sim
