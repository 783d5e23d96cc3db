#include "transport/shm/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "base/error.h"

namespace ccl::transport::shm {

namespace {

uint32_t* futex_word(std::atomic<uint32_t>* word) {
  // std::atomic<uint32_t> is a lock-free u32 with the same representation (shm_layout.h).
  return reinterpret_cast<uint32_t*>(word);
}

}  // namespace

void doorbell_force(Doorbell* bell) {
  bell->sequence.fetch_add(1, std::memory_order_seq_cst);
  // Not FUTEX_PRIVATE_FLAG: the sleeper is another process mapping the same page.
  syscall(SYS_futex, futex_word(&bell->sequence), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait_shared(std::atomic<uint32_t>* word, uint32_t expected,
                       std::chrono::microseconds timeout) {
  if (timeout.count() <= 0) return;
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
  long rc = syscall(SYS_futex, futex_word(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
  if (rc != 0 && errno != EAGAIN && errno != ETIMEDOUT && errno != EINTR) {
    throw_system_error(errno, "shm: futex wait");
  }
}

}  // namespace ccl::transport::shm
