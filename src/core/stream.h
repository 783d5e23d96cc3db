// cclStream_t on the host: an in-order queue of work run by one thread of its own. A queued
// operation keeps the communicator it uses alive; its failure is remembered as the stream's
// first error and returned by cclStreamSynchronize.
#pragma once

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
  cclResult_t first_error_ = cclSuccess;
  std::thread worker_;
};
