// Orders a ccl stream's operations on a CUDA stream (cclStreamFromCuda), in both directions:
//
//   before: when an operation is queued, an event is recorded on the CUDA stream; the thread that
//           runs the operation waits for it (polling, bounded by the operation's timeout), so the
//           operation sees what the CUDA work queued before it wrote.
//   after:  a pinned host word counts the operations done; right after queueing, the CUDA stream
//           is made to wait (cuStreamWaitValue32, GEQ) until the word reaches the operation's
//           number, so CUDA work queued later sees its result. Where the driver refuses stream
//           memory operations, a host function on the CUDA stream waits for the word instead,
//           for at most twice the operation's timeout.
//
// The word is written when the operation ends whether it succeeded or not: a failed operation
// reports its error on the ccl stream (cclStreamSynchronize) and never leaves the CUDA stream
// blocked. Free of CUDA types (the handles are opaque), so core includes it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "ccl/ccl.h"
#include "cuda/cuda_memory.h"

namespace ccl::cuda {

class StreamOrder {
 public:
  // Throws cclInvalidUsage where there is no driver or `cuda_stream` has no context.
  explicit StreamOrder(void* cuda_stream);
  ~StreamOrder();
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  // One queued operation's share of the order.
  struct Ticket {
    void* event = nullptr;  // recorded on the CUDA stream when it was queued
    uint32_t seq = 0;       // its number: the word reaches it when it ends
  };

  // On the queueing thread, before the operation is queued: records the "before" event.
  Ticket begin();
  // On the queueing thread, once it is queued: the CUDA stream waits for its end. `timeout`: the
  // operation's (the host-function fallback lets the CUDA stream go after twice that).
  void hold(const Ticket& ticket, std::chrono::milliseconds timeout);
  // On the thread that runs it, first: waits for the CUDA work before it (bounded by
  // `timeout`). cclSuccess, or the
  // error to report (cclTimeout, cclUnhandledCudaError); the operation runs in any case, so that
  // its peers are not left waiting for a collective this rank skipped.
  cclResult_t wait(const Ticket& ticket, std::chrono::milliseconds timeout);
  // On the thread that ran it, last: lets the CUDA stream go on past it, and frees the event.
  void end(const Ticket& ticket);

  void* context() const { return context_; }
  void* stream() const { return stream_; }

 private:
  void* stream_ = nullptr;
  void* context_ = nullptr;
  PinnedBuffer word_;  // a uint32_t: the number of the last operation that ended
  uint64_t word_device_ = 0;
  uint32_t next_seq_ = 0;      // begin() calls are serialized by the ccl stream (stream.h)
  bool host_func_ = false;     // stream memory operations refused: hold with a host function
  void* last_hold_ = nullptr;  // an event recorded on the CUDA stream after each hold
};

}  // namespace ccl::cuda
