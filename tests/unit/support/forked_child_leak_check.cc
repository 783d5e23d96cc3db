// Linked into every unit test: LeakSanitizer's exit-time check runs only in the test process
// itself, not in the children it forks.
//
// A child forked from a multi-threaded test inherits LeakSanitizer's list of the parent's threads
// but not the threads. Its exit-time check then tries to stop threads that do not exist, which
// can hang the child until its test gives up. The parent's own check covers the same allocations.
#include <unistd.h>

namespace {
const pid_t g_test_process = getpid();
}  // namespace

// LeakSanitizer calls this weak hook before its exit-time check; nonzero skips the check.
extern "C" __attribute__((visibility("default"))) int __lsan_is_turned_off() {
  return getpid() != g_test_process ? 1 : 0;
}
