// The path of one process group's operations on CUDA tensors, as ProcessGroupNCCL's: a
// communicator of its own, made on the group's first CUDA operation by splitting the group's
// (every rank issues it there, in the group's order) on a thread whose current device is the
// tensors' (so ccl makes its device world: every collective a program on the GPUs, no host
// thread in the loop; docs/cuda.md), and a CUDA stream of torch's pool that ccl queues on
// (cclStreamFromCuda).
//
// Each operation: an event recorded on the caller's current stream, which the lane's stream
// waits for (no host wait); the ccl call, queued on the lane's stream; the staged results copied
// back there; an event recorded after them. The work's wait() makes the caller's current stream
// wait for that event (Work::wait in ProcessGroupNCCL does the same), so `async_op=True` overlaps
// computation with communication, and its future is a CUDA future completed on the lane's stream
// (DDP's hooks chain on it). Every tensor the operation touches is recorded on the lane's stream
// with torch's caching allocator, so freeing it early never hands its memory to other work
// before the operation is done. Nothing here queries an event or synchronises while it issues,
// so a CUDA graph captures the operations (a capture forbids both).
//
// Sends and receives are batched as on the host lane (op_lane.h says why) and posted as one ccl
// group at the next collective, on a wait or query of one of them, or at endCoalescing.
//
// PreMulSum ops (a PREMUL_SUM's factor) are made once per datatype and factor and kept until the
// lane closes: where ccl runs a call on the host (no device world), it reads the op when the
// call runs, after the issuing thread moved on, and nothing here may wait for that during a
// capture.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include <chrono>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "ccl/ccl.h"
#include "work_ccl.h"

namespace ccl_torch {

class OpLane;

class CudaLane {
 public:
  // Splits `parent`'s communicator on `device` (collective over the group, after its queued
  // operations); raises naming `op` where ccl or CUDA refuses.
  CudaLane(OpLane& parent, const char* op, c10::Device device, std::chrono::milliseconds timeout);
  // Waits (bounded: every device program has the communicator's timeout) for the lane's stream,
  // then frees the PreMulSum ops, the ccl stream and the communicator (aborted after a failure).
  ~CudaLane();
  CudaLane(const CudaLane&) = delete;
  CudaLane& operator=(const CudaLane&) = delete;

  const c10::Device& device() const { return device_; }
  // The stream the calling thread works on now, on the lane's device (torch's current stream).
  c10::Stream caller_stream() const;

  // Posts the pending batch, then queues `launch` after the caller's current stream's work, and
  // completes `work` on the lane's stream. A launch that fails raises at once.
  void submit(const c10::intrusive_ptr<WorkCcl>& work, Launch launch);
  void submit_p2p(const c10::intrusive_ptr<WorkCcl>& work, Launch launch);
  void post_batch_holding(const WorkCcl* work);

  // Waits on the host until the lane's stream has run everything queued on it (bounded: every
  // device program has the communicator's timeout), then raises, naming `op`, if it failed. For
  // a barrier: as NCCL's, it ends after the group's CUDA work. Not during a capture.
  void drain(const char* op);
  // A PreMulSum op multiplying by `factor` (one element of `type`, host memory), kept until the
  // lane closes. Called from inside a launch (the lane's lock held).
  cclRedOp_t premul_op(const at::Tensor& factor, cclDataType_t type);
  // Raises, naming `op`, if the communicator failed (a device program timed out, a peer failed).
  void check_async(const char* op);
  // Ends the communicator now: every program in flight, here and on the peers, is released.
  void abort();

 private:
  // Queues `launch` (posting `works`) after the current stream and completes each work.
  void enqueue_locked(const std::vector<c10::intrusive_ptr<WorkCcl>>& works, const char* name,
                      const Launch& launch);
  void post_batch_locked();
  void post_batch_locked_quietly();  // at close: a failure stays with the batch's works
  [[noreturn]] void raise(const char* op, const char* call, cclResult_t r) const;

  const c10::Device device_;
  cclComm_t comm_ = nullptr;
  c10::Stream stream_;
  cclStream_t ccl_stream_ = nullptr;
  std::mutex mutex_;  // issue order on the lane
  std::vector<c10::intrusive_ptr<WorkCcl>> batch_;
  std::map<std::pair<cclDataType_t, uint64_t>, cclRedOp_t> premul_;  // by type and factor bits
  bool aborted_ = false;
};

}  // namespace ccl_torch
