#include "core/tuning/figures_cache.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "base/replace_file.h"
#include "ccl/ccl.h"
#include "core/tuning/tuner.h"

namespace ccl::tune {

namespace {

constexpr const char* kKeyPrefix = "# key: ";

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

std::string figures_cache_dir() {
  const std::string named = config_string("CCL_TUNER_CACHE");
  if (named == "none") return "";
  if (!named.empty()) return named;
  const std::string xdg = env_or_empty("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/ccl";
  const std::string home = env_or_empty("HOME");
  if (!home.empty()) return home + "/.cache/ccl";
  return "";
}

std::string figures_cache_key(const std::string& host, const Shape& shape,
                              std::vector<std::string> transports) {
  std::sort(transports.begin(), transports.end());
  transports.erase(std::unique(transports.begin(), transports.end()), transports.end());
  char text[256];
  std::snprintf(text, sizeof(text),
                "ccl %d.%d.%d ranks %d hosts %d per-host %d%s shm %d window %zu chunk %zu via",
                CCL_MAJOR, CCL_MINOR, CCL_PATCH, shape.nranks, shape.nhosts, shape.ranks_per_host,
                shape.uniform_hosts ? "" : " (not uniform)", shape.shm ? 1 : 0, shape.window_bytes,
                shape.chunk_bytes);
  std::string key = "host " + host + " " + text;
  for (const std::string& t : transports) key += " " + t;
  // One line: a host name with a newline in it would end the comment.
  std::replace(key.begin(), key.end(), '\n', ' ');
  return key;
}

std::string figures_cache_path(const std::string& dir, const std::string& key) {
  char name[40];
  std::snprintf(name, sizeof(name), "tuner-%016" PRIx64 ".txt", fnv1a(key));
  return dir + "/" + name;
}

std::optional<Figures> read_cached_figures(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) return std::nullopt;  // not probed yet on this machine and shape
  std::string first;
  std::getline(in, first);
  if (first != kKeyPrefix + key) {
    CCL_INFO(kTune, "tuner cache %s is for another shape or machine (%s): probing", path.c_str(),
             first.c_str());
    return std::nullopt;
  }
  try {
    Figures figures = read_figures_file(path);
    check_figures(figures, path.c_str());
    return figures;
  } catch (const Error& e) {
    CCL_WARN(kTune, "tuner cache ignored, probing instead: %s", e.what());
    return std::nullopt;
  }
}

bool write_cached_figures(const std::string& path, const std::string& key, const Figures& figures) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code error;
  std::filesystem::create_directories(dir, error);  // mkdir -p, 0777 less the umask
  if (error) {
    CCL_WARN(kTune, "tuner cache: cannot make directory %s: %s (set CCL_TUNER_CACHE)", dir.c_str(),
             error.message().c_str());
    return false;
  }
  // Replaced whole: a reader sees the old entry, the new one or none, never a part.
  const std::string failed = replace_file(path, kKeyPrefix + key + "\n" + format_figures(figures));
  if (failed.empty()) return true;
  CCL_WARN(kTune, "tuner cache: %s", failed.c_str());
  return false;
}

}  // namespace ccl::tune
