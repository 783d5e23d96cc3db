// Logging like NCCL's, so users' grep habits work:
//   host:pid:tid [rank] CCL INFO message
// CCL_DEBUG=WARN|INFO|TRACE picks the level (default: none but errors the caller gets anyway),
// CCL_DEBUG_SUBSYS=INIT,COLL,... (or ^COLL to exclude, ALL) picks subsystems,
// CCL_DEBUG_FILE=path writes there instead of stderr (%h host, %p pid expanded).
#pragma once

#include <cstdint>

namespace ccl {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum LogSubsys : uint32_t {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kNet = 1u << 2,
  kShm = 1u << 3,
  kTopo = 1u << 4,
  kTune = 1u << 5,
  kBootstrap = 1u << 6,
  kEnv = 1u << 7,
  kAll = 0xffffffffu,
};

bool log_enabled(LogLevel level, uint32_t subsys);
void log_message(LogLevel level, uint32_t subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
// The rank shown in log lines of the calling thread (-1: none).
void log_set_thread_rank(int rank);
int log_thread_rank();

}  // namespace ccl

#define CCL_LOG(level, subsys, ...)                                      \
  do {                                                                   \
    if (::ccl::log_enabled(::ccl::LogLevel::level, (subsys)))            \
      ::ccl::log_message(::ccl::LogLevel::level, (subsys), __VA_ARGS__); \
  } while (0)
#define CCL_WARN(subsys, ...) CCL_LOG(Warn, subsys, __VA_ARGS__)
#define CCL_INFO(subsys, ...) CCL_LOG(Info, subsys, __VA_ARGS__)
#define CCL_TRACE(subsys, ...) CCL_LOG(Trace, subsys, __VA_ARGS__)
