// What one rank of a fault or recovery trial shares with its driver script: wall-clock stamps
// (CLOCK_REALTIME ms, comparable across processes) and small files written whole.
#pragma once

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace ccl::fault {

inline int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

// Written to a temporary name and renamed, so that a reader never sees half of it.
inline void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  fputs(text.c_str(), f);
  fclose(f);
  rename(tmp.c_str(), path.c_str());
}

}  // namespace ccl::fault
