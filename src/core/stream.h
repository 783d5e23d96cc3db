// cclStream_t and cclEvent_t on the host.
//
// A stream is an in-order queue of work (StreamCore) with a worker thread of its own; a queued
// operation keeps the communicator it uses alive. cclStreamSynchronize and cclEventSynchronize
// run the queued work on the calling thread when they can (stream_core.h says why).
// An event is a point in a stream's work: the number of items queued when it was recorded.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "ccl/ccl.h"
#include "core/stream_core.h"
#include "core/work_item.h"
#include "cuda/stream_order.h"

namespace ccl {

// A point in one stream's work (an event's record). Holds the stream's core, so it can be asked
// about after the stream is destroyed. No core: nothing to wait for (never recorded, or recorded
// on the NULL stream).
struct StreamPoint {
  std::shared_ptr<StreamCore> core;
  uint64_t seq = 0;

  cclResult_t status() const { return core ? core->status(seq) : cclSuccess; }
};

}  // namespace ccl

struct cclStream {
  static constexpr unsigned kMagic = 0x57ea4c11u;
  unsigned magic = kMagic;

  cclStream();
  // cclStreamFromCuda: ordered on that CUDA stream (cuda/stream_order.h). Throws cclInvalidUsage
  // where there is no CUDA driver.
  explicit cclStream(struct CUstream_st* cuda_stream);
  ~cclStream();  // runs or waits for the queued work, then stops the worker

  // Queues `work` (a guarded API body: it returns a result and never throws); `timeout` bounds it
  // (its communicator's timeout), see StreamCore::enqueue. On a stream of cclStreamFromCuda the
  // work first waits for the CUDA work queued before, and the CUDA stream waits for its end
  // (throws cclUnhandledCudaError if the driver refuses either).
  void enqueue(ccl::WorkItem work, std::chrono::milliseconds timeout);
  // Runs or waits for everything queued so far; returns and clears the first error since the
  // previous synchronize (cclTimeout if the stream stalled past its bound).
  cclResult_t synchronize();
  cclResult_t query();  // cclInProgress while work is queued or running, else the first error
  // Runs or waits for everything queued so far, leaving the error for synchronize(); false if the
  // stream stalled past its bound.
  bool drain() { return core_->run_until(core_->queued()); }
  // The point of the work queued so far (cclEventRecord).
  ccl::StreamPoint point() const { return {core_, core_->queued()}; }

 private:
  std::shared_ptr<ccl::StreamCore> core_;
  std::unique_ptr<ccl::cuda::StreamOrder> cuda_;  // cclStreamFromCuda's; else null
  std::mutex cuda_enqueue_;  // the order's numbers follow the queue's: one enqueue at a time
  std::thread worker_;
};

struct cclEvent {
  static constexpr unsigned kMagic = 0xe7e27c11u;
  unsigned magic = kMagic;

  void record(const ccl::StreamPoint& point) {
    std::lock_guard lock(mutex_);
    point_ = point;
  }
  ccl::StreamPoint point() const {
    std::lock_guard lock(mutex_);
    return point_;
  }

 private:
  mutable std::mutex mutex_;  // any thread may record, query or wait
  ccl::StreamPoint point_;
};
