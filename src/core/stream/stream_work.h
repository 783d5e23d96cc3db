// One item of a stream's queue, as data (call/call.h says why queues hold values): calls of one
// communicator to run in order, or a wait for a point of another stream (cclStreamWaitEvent); on
// a stream made from a CUDA stream, also the item's place in the CUDA stream's order.
//
// Kept in the stream's ring of kQueueSlots items (stream_core.h): a plain collective's item
// holds no heap memory, so queueing it allocates nothing, and an item is 120 bytes (moved about
// five times between the call and its run), so a stream's ring is 480 KiB, touched when the
// stream is made. A group's part or a wait holds its extra part on the heap.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "ccl/ccl.h"
#include "core/call/call.h"
#include "core/call/call_target.h"
#include "core/stream/stream_point.h"
#include "cuda/stream_order.h"

namespace ccl {

struct StreamWork {
  // Calls: `target` runs `call`, or the calls of extra->group (a group's part, in order) when
  // there is one. The reference keeps the communicator alive until the item ran.
  std::shared_ptr<CallTarget> target;
  Call call;
  // What only some items have: a group's part, or a wait (no target) for `wait` to be reached,
  // in the name of `function` (cclStreamWaitEvent).
  struct Extra {
    std::vector<Call> group;
    StreamPoint wait;
    const char* function = nullptr;
  };
  std::unique_ptr<Extra> extra;
  // On a stream made from a CUDA stream: the item first waits (up to `timeout`) for the CUDA
  // work queued before it, and the CUDA stream waits for its end (cuda/stream_order.h).
  cuda::StreamOrder* order = nullptr;
  cuda::StreamOrder::Ticket ticket;
  std::chrono::milliseconds timeout{0};

  // Calls of `target`, counted as queued on it (CallTarget::run_queued ends the count).
  static StreamWork of_call(std::shared_ptr<CallTarget> target, Call call);
  static StreamWork of_group(std::shared_ptr<CallTarget> target, std::vector<Call> calls);
  // cclStreamWaitEvent's wait for `point`.
  static StreamWork wait_for(StreamPoint point, const char* function);

  // Runs the item (never throws: a failure is its result).
  cclResult_t operator()() noexcept;
  // Drops what the item holds (its communicator's reference first of all).
  void reset() {
    target.reset();
    call.lists.reset();
    extra.reset();
    order = nullptr;
  }
};

}  // namespace ccl
