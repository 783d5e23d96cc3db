// A torch Work standing on a ccl event: the operation was queued on its process group's ccl
// stream and the event recorded after it. Any thread may wait, query or take the future.
//
// Completion happens once, on whichever thread sees the event reach its point first: a thread in
// wait() (which then runs the queued work itself, as cclEventSynchronize does, so a blocking
// torch call costs what a blocking ccl call does) or the process group's watcher, which
// completes works in issue order so that futures (DDP's) complete without anyone waiting.
// Completing copies staged results back into the caller's tensors, releases what the operation
// held, and marks the future with the output tensors or the error.
//
// A work of the group's CUDA lane (cuda_lane.h) completes on the device instead: when the lane
// queues it, its copy-backs and an event go on the lane's stream after the call and its future (a
// CUDA future) completes there; wait() and synchronize() make the caller's current stream wait
// for the event, and isCompleted() asks the event.
//
// Under torch.profiler (or any RecordFunction callback of the user scope) each work is a span
// named "ccl:<operation>" (span_title) with its input tensors, so that record_shapes shows their
// sizes: it opens when the process group makes the work, on the caller's thread, and closes when
// the work completes, on whichever thread completes it (c10d::Work's own profiling: its
// constructor opens the span, finish() closes it). Without a listening callback the work passes
// no title and torch records nothing: the cost is one look-up of the thread's callbacks.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <utility>
#include <vector>

#include "ccl/ccl.h"

namespace ccl_torch {

class OpLane;
class CudaLane;

// Queues one operation on (comm, stream); its ccl result (argument errors come back at once).
// The work holds it until it completes: the tensors it captured are what the queued operation
// reads and writes.
using Launch = std::function<cclResult_t(cclComm_t comm, cclStream_t stream)>;

class WorkCcl : public c10d::Work {
 public:
  // `outputs` is the future's value (torch's convention per operation); `inputs` are the tensors
  // the operation reads (for one that only receives, the tensors it writes), recorded with the
  // span; `span` names the span instead of span_title(type).
  WorkCcl(std::shared_ptr<OpLane> lane, int rank, c10d::OpType type, const char* name,
          std::vector<at::Tensor> outputs, const std::vector<at::Tensor>& inputs,
          const char* span = nullptr);
  ~WorkCcl() override;

  // Set up by the process group before the work is queued.
  void copy_back_after(std::vector<std::pair<at::Tensor, at::Tensor>> pairs);
  void on_done(std::function<void()> fn) { on_done_.push_back(std::move(fn)); }
  void hold(Launch launch) { held_ = std::move(launch); }
  const Launch& held() const { return held_; }
  cclEvent_t event() const { return event_; }
  const char* name() const { return name_; }
  // The bound of a wait() that names none (BarrierOptions::timeout): without one, the
  // communicator's timeout bounds it.
  void set_wait_timeout(std::chrono::milliseconds timeout) { wait_timeout_ = timeout; }

  // Makes this a work of `lane` (before it is queued): its future becomes a CUDA future of the
  // lane's device; `tensors`, and the buffers keep_for_stream adds, are recorded on the lane's
  // stream when the work is queued (torch's caching allocator then keeps their memory for it).
  void use_cuda(std::shared_ptr<CudaLane> lane, std::vector<at::Tensor> tensors);
  CudaLane* cuda_lane() const { return cuda_.get(); }
  void keep_for_stream(const at::Tensor& tensor) {
    if (cuda_) stream_tensors_.push_back(tensor);
  }
  // The CUDA lane queued the call on `stream` (current on this thread): the tensors are recorded
  // on it, the copy-backs and the end event queued, the future completed there.
  void enqueued_on(const c10::Stream& stream);
  // The CUDA lane could not queue the call: the work fails with `text`.
  void fail_on_device(const std::string& text);

  // recvAnysource: the rank the message came from (Work::sourceRank, Python's _source_rank()).
  void set_source_rank(int rank) { source_rank_ = rank; }
  int sourceRank() const override {
    return source_rank_ >= 0 ? source_rank_ : c10d::Work::sourceRank();
  }

  bool isCompleted() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // Waits for the operation (kNoTimeout: for set_wait_timeout's bound, else bounded by the
  // communicator's timeout); raises the operation's error, or a timeout naming the operation
  // when `timeout` passes first.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // A CUDA work: the caller's current stream waits for it (a host work is done when wait returns).
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Runs (or waits for) the operation on the calling thread, then completes the work.
  void drive();
  // Completes the work with the event's status; only the first call does anything. A failure
  // before the work was queued comes as `message`.
  void complete(cclResult_t status, const std::string& message = "");

  // The profiler's name for an operation of `type`: "ccl:all_reduce", "ccl:broadcast", ...
  static const char* span_title(c10d::OpType type);

 private:
  // `span`: the span's title when a profiler listens, else nullptr (no span).
  WorkCcl(std::shared_ptr<OpLane> lane, int rank, c10d::OpType type, const char* name,
          std::vector<at::Tensor> outputs, const std::vector<at::Tensor>& inputs, const char* span,
          bool);

  std::shared_ptr<OpLane> lane_;
  const char* name_;
  std::vector<at::Tensor> outputs_;
  cclEvent_t event_ = nullptr;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back_;  // (user tensor, staged buffer)
  std::vector<std::function<void()>> on_done_;
  std::chrono::milliseconds wait_timeout_ = kNoTimeout;
  int source_rank_ = -1;
  Launch held_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> completing_{false};
  std::shared_ptr<CudaLane> cuda_;
  std::vector<at::Tensor> stream_tensors_;  // a CUDA work's tensors, until it is queued
  std::optional<c10::Event> done_;          // a CUDA work's end, once queued
};

}  // namespace ccl_torch
