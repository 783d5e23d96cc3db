// A point in one stream's work (an event's record, cclEventRecord): the number of items queued
// when it was taken, and on a stream made from a CUDA stream the device work queued before it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ccl/ccl.h"
#include "core/call/call_target.h"
#include "cuda/stream_ops.h"

namespace ccl {

class StreamCore;

// The device side of a point of a stream made from a CUDA stream: an event recorded on the CUDA
// stream after the device collectives queued straight on it (device_world.h), and the
// communicators that queued them (whose failure is the point's).
struct DeviceMark {
  void* context = nullptr;
  std::unique_ptr<cuda::Event> event;
  std::vector<std::weak_ptr<CallTarget>> comms;
  // cclSuccess once the event is done and no communicator failed; cclInProgress before.
  cclResult_t status() const;
};

// Holds the stream's core, so it can be asked about after the stream is destroyed. No core:
// nothing to wait for (never recorded, or recorded on the NULL stream).
struct StreamPoint {
  std::shared_ptr<StreamCore> core;
  uint64_t seq = 0;
  std::shared_ptr<const DeviceMark> device;  // null: no device work before the point

  cclResult_t status() const;
  // Waits for the point (running its stream's work on this thread when `run`), then returns its
  // status; the device work before it too (polled, bounded as the host work's wait). Throws
  // cclTimeout naming `function` if the stream stalls.
  cclResult_t reach(bool run, const char* function) const;
};

}  // namespace ccl
