// cclStream_t and cclEvent_t on the host.
//
// A stream is an in-order queue of work (StreamCore: values, stream_work.h) with a worker thread
// of its own; a queued operation keeps the communicator it uses alive. cclStreamSynchronize and
// cclEventSynchronize run the queued work on the calling thread when they can (stream_core.h says
// why). An event is a point in a stream's work: the number of items queued when it was recorded.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "core/call/call_target.h"
#include "core/stream/stream_core.h"
#include "core/stream/stream_point.h"
#include "core/stream/stream_work.h"
#include "cuda/stream_ops.h"
#include "cuda/stream_order.h"

struct cclStream {
  static constexpr unsigned kMagic = 0x57ea4c11u;
  unsigned magic = kMagic;

  cclStream();
  // cclStreamFromCuda: ordered on that CUDA stream (cuda/stream_order.h). Throws cclInvalidUsage
  // where there is no CUDA driver.
  explicit cclStream(struct CUstream_st* cuda_stream);
  ~cclStream();  // runs or waits for the queued work, then stops the worker

  // Queues `work` (calls of a communicator, or a wait); `timeout` bounds it (its communicator's
  // timeout), see StreamCore::enqueue. On a stream of cclStreamFromCuda the
  // work first waits for the CUDA work queued before, and the CUDA stream waits for its end
  // (throws cclUnhandledCudaError if the driver refuses either). Host work cannot be captured
  // into a CUDA graph: on a CUDA stream that is capturing, throws cclInvalidUsage naming `what`.
  void enqueue(ccl::StreamWork work, std::chrono::milliseconds timeout,
               const char* what = "this operation");

  // CUDA work queued on this stream from now on waits for `event` (cuStreamWaitEvent, in the
  // queue's order): a stream made from a CUDA stream only.
  void wait_on_cuda(const ccl::cuda::Event& event);
  // Made by cclStreamFromCuda (its CUDA stream may be the legacy stream, NULL).
  bool on_cuda() const { return cuda_ != nullptr; }
  // cclStreamFromCuda's CUDA stream (NULL: the legacy stream); nullptr too for a stream of host
  // work (cclStreamCreate): ask on_cuda().
  void* cuda_stream() const { return cuda_ ? cuda_->stream() : nullptr; }
  // Runs `queue(cuda_stream())` in the order of this stream's queue (what it queues on the CUDA
  // stream comes after the holds of the host work queued before), and remembers that `comm`
  // queued device work straight on the CUDA stream if it returns true: synchronize() and
  // query() then wait for the CUDA stream too and report the communicator's failure.
  template <class Queue>
  bool queue_on_cuda(const std::shared_ptr<ccl::CallTarget>& comm, Queue&& queue) {
    std::lock_guard lock(cuda_enqueue_);
    if (!queue(cuda_->stream())) return false;
    note_device_work(comm);
    return true;
  }
  // Runs or waits for everything queued so far; returns and clears the first error since the
  // previous synchronize (cclTimeout if the stream stalled past its bound).
  cclResult_t synchronize();
  // cclInProgress while work is queued or running (on a CUDA stream: device work too), else the
  // first error.
  cclResult_t query();
  // Runs or waits for everything queued so far, leaving the error for synchronize(); false if the
  // stream stalled past its bound.
  bool drain() { return core_->run_until(core_->queued()); }
  // The point of the work queued so far (cclEventRecord): on a CUDA stream with device work,
  // an event recorded on it too (not while it captures a graph: then only the host work).
  ccl::StreamPoint point();

 private:
  std::shared_ptr<ccl::StreamCore> core_;
  void note_device_work(const std::shared_ptr<ccl::CallTarget>& comm);  // under cuda_enqueue_
  // The device work's end and failure, after the host work's: cclSuccess, cclInProgress (only
  // when not `wait`), or the error.
  cclResult_t device_status(bool wait);

  std::unique_ptr<ccl::cuda::StreamOrder> cuda_;  // cclStreamFromCuda's; else null
  std::mutex cuda_enqueue_;  // the order's numbers follow the queue's: one enqueue at a time
  // Communicators that queued device work straight on the CUDA stream (under cuda_enqueue_).
  std::vector<std::weak_ptr<ccl::CallTarget>> device_comms_;
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
