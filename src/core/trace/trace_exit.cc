#include "core/trace/trace_exit.h"

#include <cstdlib>
#include <mutex>
#include <set>

#include "base/log.h"
#include "core/trace/trace_recorder.h"

namespace ccl::trace {

namespace {

struct Registry {
  std::mutex mutex;
  std::set<TraceRecorder*> recorders;
  bool installed = false;
};

// Never destroyed: communicators may be destroyed by static destructors after the handler ran.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

void write_all() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (TraceRecorder* recorder : r.recorders) recorder->write();
  r.recorders.clear();
}

}  // namespace

void write_at_exit(TraceRecorder* recorder) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.installed) {
    // The log's settings are made before the handler is registered, so they outlive it.
    (void)log_enabled(LogLevel::Warn, kColl);
    r.installed = std::atexit(write_all) == 0;
  }
  r.recorders.insert(recorder);
}

void forget_at_exit(TraceRecorder* recorder) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.recorders.erase(recorder);
}

}  // namespace ccl::trace
