#include "base/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/config.h"

namespace ccl {

namespace {

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kInit}, {"COLL", kColl},           {"NET", kNet}, {"SHM", kShm}, {"TOPO", kTopo},
    {"TUNE", kTune}, {"BOOTSTRAP", kBootstrap}, {"ENV", kEnv}, {"ALL", kAll},
};

struct LogSettings {
  LogLevel level = LogLevel::None;
  uint32_t subsys = 0;
  FILE* out = stderr;
  char host[64] = "";
};

uint32_t parse_subsys(const std::string& spec) {
  bool exclude = !spec.empty() && spec[0] == '^';
  uint32_t mask = 0;
  size_t pos = exclude ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string word = spec.substr(pos, comma - pos);
    for (const auto& s : kSubsysNames) {
      if (strcasecmp(word.c_str(), s.name) == 0) mask |= s.bit;
    }
    pos = comma + 1;
  }
  return exclude ? ~mask : mask;
}

// Read once: the log must not depend on config lookups failing half-way through a run.
const LogSettings& settings() {
  static LogSettings s = [] {
    LogSettings st;
    const char* level = getenv("CCL_DEBUG");
    if (level != nullptr) {
      if (strcasecmp(level, "WARN") == 0)
        st.level = LogLevel::Warn;
      else if (strcasecmp(level, "INFO") == 0)
        st.level = LogLevel::Info;
      else if (strcasecmp(level, "TRACE") == 0)
        st.level = LogLevel::Trace;
    }
    const char* subsys = getenv("CCL_DEBUG_SUBSYS");
    st.subsys = parse_subsys(subsys != nullptr ? subsys : "INIT,COLL,NET,SHM,BOOTSTRAP,ENV");
    gethostname(st.host, sizeof(st.host) - 1);
    if (char* dot = strchr(st.host, '.')) *dot = '\0';
    const char* file = getenv("CCL_DEBUG_FILE");
    if (file != nullptr && *file != '\0') {
      std::string path;
      for (const char* p = file; *p; ++p) {
        if (p[0] == '%' && p[1] == 'h')
          path += st.host, ++p;
        else if (p[0] == '%' && p[1] == 'p')
          path += std::to_string(getpid()), ++p;
        else
          path += *p;
      }
      FILE* f = fopen(path.c_str(), "a");
      if (f != nullptr) st.out = f;
    }
    return st;
  }();
  return s;
}

thread_local int t_rank = -1;

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Warn:
      return "WARN";
    case LogLevel::Info:
      return "INFO";
    case LogLevel::Trace:
      return "TRACE";
    default:
      return "";
  }
}

}  // namespace

bool log_enabled(LogLevel level, uint32_t subsys) {
  const LogSettings& s = settings();
  // Warnings ignore the subsystem filter: they always matter.
  if (level == LogLevel::Warn) return s.level >= LogLevel::Warn;
  return s.level >= level && (s.subsys & subsys) != 0;
}

void log_message(LogLevel level, uint32_t /*subsys*/, const char* fmt, ...) {
  const LogSettings& s = settings();
  char body[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  char rank[16] = "";
  if (t_rank >= 0) snprintf(rank, sizeof(rank), "[%d] ", t_rank);
  // One fprintf per line so lines of different threads do not interleave.
  fprintf(s.out, "%s:%d:%ld %sCCL %s %s\n", s.host, static_cast<int>(getpid()),
          static_cast<long>(syscall(SYS_gettid)), rank, level_name(level), body);
  fflush(s.out);
}

void log_set_thread_rank(int rank) { t_rank = rank; }
int log_thread_rank() { return t_rank; }

}  // namespace ccl
