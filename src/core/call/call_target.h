// What a queue of calls runs them on: the communicator, seen from the queues below it (streams,
// stream/stream_work.h; a non-blocking communicator's own queue), which must not know it
// (tests/layering: stream is below comm). A queue item holds its target by shared_ptr, so that
// queued work keeps its communicator alive until it ran.
#pragma once

#include <span>

#include "ccl/ccl.h"
#include "core/call/call.h"

namespace ccl {

class CallTarget {
 public:
  // Runs `calls` in order on the calling thread, stopping at the first failure, and ends one
  // unit of the target's count of queued work (the caller began it when it queued them:
  // cclCommFinalize waits for the count). Never throws: a failure is recorded as the target's
  // last error and logged, and its code returned.
  virtual cclResult_t run_queued(std::span<const Call> calls) noexcept = 0;
  // The watchdog's look at the target's device programs, now.
  virtual void poll_device() = 0;
  // The target's first failure (cclSuccess if none).
  virtual cclResult_t async_error() const = 0;

 protected:
  ~CallTarget() = default;
};

}  // namespace ccl
