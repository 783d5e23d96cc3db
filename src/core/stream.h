// cclStream_t on the host: an in-order queue of work run by one thread of its own. A queued
// operation keeps the communicator it uses alive; its failure is remembered as the stream's
// first error and returned by cclStreamSynchronize.
//
// The worker is often faster than the thread that queues (a small collective takes a fraction of
// a microsecond): if it slept on the condition variable each time the queue ran dry, every
// operation would pay a futex wake-up (tens of microseconds on a VM) while the peers wait. So an
// idle worker first polls for new work for a short while (yielding its core), and the queueing
// thread notifies only a worker that is really asleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "ccl/ccl.h"

struct cclStream {
  static constexpr unsigned kMagic = 0x57ea4c11u;
  unsigned magic = kMagic;

  cclStream();
  ~cclStream();  // waits for queued work
  void enqueue(std::function<cclResult_t()> work);
  cclResult_t synchronize();  // waits; returns and clears the first error
  cclResult_t query();        // cclInProgress while work is queued or running

 private:
  void worker_loop();

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable idle_;
  std::deque<std::function<cclResult_t()>> queue_;
  size_t running_ = 0;
  bool stopping_ = false;
  bool worker_asleep_ = false;       // under mutex_
  std::atomic<uint64_t> queued_{0};  // operations ever queued: polled without the lock
  cclResult_t first_error_ = cclSuccess;
  std::thread worker_;
};
