#include "work_ccl.h"

#include <ATen/core/jit_type.h>
#include <ATen/record_function.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <stdexcept>
#include <thread>

#include "cuda_lane.h"
#include "op_lane.h"
#include "torch_compat.h"

namespace ccl_torch {

namespace {

// Whether a RecordFunction callback of the user scope listens on this thread now (torch.profiler,
// the autograd profiler, or any observer): the check every RECORD_FUNCTION makes, a thread-local
// look-up, so a work costs nothing more while nobody profiles.
bool profiler_listens() {
  return at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE).has_value();
}

}  // namespace

const char* WorkCcl::span_title(c10d::OpType type) {
  using c10d::OpType;
  switch (type) {
    case OpType::BROADCAST:
      return "ccl:broadcast";
    case OpType::ALLREDUCE:
      return "ccl:all_reduce";
    case OpType::ALLREDUCE_COALESCED:
      return "ccl:all_reduce_coalesced";
    case OpType::REDUCE:
      return "ccl:reduce";
    case OpType::ALLGATHER:
      return "ccl:all_gather";
    case OpType::_ALLGATHER_BASE:
      return "ccl:_all_gather_base";
    case OpType::ALLGATHER_COALESCED:
      return "ccl:all_gather_coalesced";
    case OpType::GATHER:
      return "ccl:gather";
    case OpType::SCATTER:
      return "ccl:scatter";
    case OpType::REDUCE_SCATTER:
      return "ccl:reduce_scatter";
    case OpType::_REDUCE_SCATTER_BASE:
      return "ccl:_reduce_scatter_base";
    case OpType::ALLTOALL_BASE:
    case OpType::ALLTOALL:
      return "ccl:all_to_all";
    case OpType::SEND:
      return "ccl:send";
    case OpType::RECV:
      return "ccl:recv";
    case OpType::RECVANYSOURCE:
      return "ccl:recvAnySource";
    case OpType::BARRIER:
      return "ccl:barrier";
    case OpType::COALESCED:
      return "ccl:coalesced";
    case OpType::_ALLREDUCE_SPARSE:
      return "ccl:sparse_all_reduce";
#if CCL_TORCH_AT_LEAST(2, 12)
    case OpType::REDUCE_SCATTER_TENSOR_COALESCED:
      return "ccl:reduce_scatter_tensor_coalesced";
#endif
#if CCL_TORCH_AT_LEAST(2, 14)
    case OpType::ALLGATHER_INTO_TENSOR_COALESCED:
      return "ccl:all_gather_into_tensor_coalesced";
#endif
    case OpType::UNKNOWN:
      break;
  }
  return "ccl:unknown";
}

WorkCcl::WorkCcl(std::shared_ptr<OpLane> lane, int rank, c10d::OpType type, const char* name,
                 std::vector<at::Tensor> outputs, const std::vector<at::Tensor>& inputs,
                 const char* span)
    : WorkCcl(std::move(lane), rank, type, name, std::move(outputs), inputs,
              profiler_listens() ? (span != nullptr ? span : span_title(type)) : nullptr, true) {}

// c10d::Work opens the span (asynchronous: it may close on another thread) when given a title,
// with the inputs as its arguments, and closes it in finish(), which complete() calls once.
WorkCcl::WorkCcl(std::shared_ptr<OpLane> lane, int rank, c10d::OpType type, const char* name,
                 std::vector<at::Tensor> outputs, const std::vector<at::Tensor>& inputs,
                 const char* span, bool)
    : c10d::Work(rank, type, span,
                 span != nullptr ? std::optional<std::vector<at::Tensor>>(inputs) : std::nullopt),
      lane_(std::move(lane)),
      name_(name),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
  const cclResult_t r = cclEventCreate(&event_);
  TORCH_CHECK(r == cclSuccess, "ccl ", name, ": cclEventCreate: ", cclGetErrorString(r));
}

WorkCcl::~WorkCcl() {
  if (event_ != nullptr) cclEventDestroy(event_);
}

void WorkCcl::copy_back_after(std::vector<std::pair<at::Tensor, at::Tensor>> pairs) {
  for (auto& p : pairs) copy_back_.push_back(std::move(p));
}

void WorkCcl::use_cuda(std::shared_ptr<CudaLane> lane, std::vector<at::Tensor> tensors) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     std::vector<c10::Device>{lane->device()});
  cuda_ = std::move(lane);
  stream_tensors_ = std::move(tensors);
}

void WorkCcl::enqueued_on(const c10::Stream& stream) {
  const c10::impl::VirtualGuardImpl guard(stream.device_type());
  for (const auto& [user, staged] : copy_back_) {
    stream_tensors_.push_back(user);
    stream_tensors_.push_back(staged);
  }
  for (const auto& t : stream_tensors_) {
    if (t.defined() && t.device() == stream.device() && t.has_storage()) {
      guard.recordDataPtrOnStream(t.storage().data_ptr(), stream);
    }
  }
  for (auto& [user, staged] : copy_back_) user.copy_(staged);  // on the lane's stream
  done_.emplace(stream.device_type());
  done_->record(stream);
  for (auto& fn : on_done_) fn();
  on_done_.clear();
  copy_back_.clear();
  stream_tensors_.clear();
  held_ = nullptr;
  finish();
  future_->markCompleted(c10::IValue(outputs_));  // its events go on the lane's stream
}

void WorkCcl::fail_on_device(const std::string& text) {
  if (completing_.exchange(true)) return;
  const auto error = std::make_exception_ptr(std::runtime_error(text));
  on_done_.clear();
  copy_back_.clear();
  stream_tensors_.clear();
  held_ = nullptr;
  finish(error);
  future_->setError(error);
}

void WorkCcl::synchronize() {
  if (!cuda_) return;
  cuda_->post_batch_holding(this);
  if (done_) done_->block(cuda_->caller_stream());
}

bool WorkCcl::isCompleted() {
  if (cuda_) {
    cuda_->post_batch_holding(this);
    return !done_ || done_->query();  // no event: failed before it was queued
  }
  lane_->post_batch_holding(this);
  if (c10d::Work::isCompleted()) return true;
  // The event may have reached its point before the watcher got to it.
  const cclResult_t r = cclEventQuery(event_);
  if (r == cclInProgress) return false;
  complete(r);
  return true;
}

void WorkCcl::drive() { complete(cclEventSynchronize(event_)); }

bool WorkCcl::wait(std::chrono::milliseconds timeout) {
  if (cuda_) {
    synchronize();
    if (auto error = exception()) std::rethrow_exception(error);
    if (timeout != kNoTimeout) {
      // A caller's own bound: the host waits too (as ProcessGroupNCCL's wait with a timeout).
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (!done_->query() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      TORCH_CHECK(done_->query(), "ccl ", name_, ": Timed out waiting ", timeout.count(),
                  "ms for the operation to complete (the wait's timeout)");
    }
    cuda_->check_async(name_);
    return true;
  }
  lane_->post_batch_holding(this);
  if (timeout == kNoTimeout) timeout = wait_timeout_;
  if (timeout == kNoTimeout) {
    drive();
  } else {
    // A caller's own bound: poll (the watcher or the stream's worker runs the operation).
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    cclResult_t r = cclEventQuery(event_);
    while (r == cclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      r = cclEventQuery(event_);
    }
    // The operation stays queued (the communicator's own timeout still bounds it): a later
    // wait may see it complete, once a late rank meets it. Worded as Gloo's.
    TORCH_CHECK(r != cclInProgress, "ccl ", name_, ": Timed out waiting ", timeout.count(),
                "ms for the operation to complete (the wait's timeout)");
    complete(r);
  }
  // complete() may have run on another thread: wait for it to publish, then raise its error.
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_; });
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void WorkCcl::complete(cclResult_t status, const std::string& message) {
  if (completing_.exchange(true)) return;
  std::exception_ptr error;
  if (status == cclSuccess && message.empty()) {
    try {
      for (auto& [user, staged] : copy_back_) user.copy_(staged);
    } catch (...) {
      error = std::current_exception();
    }
  } else {
    // A refused argument leaves the communicator as it was; anything else may have broken it.
    if (status != cclInvalidArgument && status != cclInvalidUsage) lane_->note_failure(status);
    const std::string text = message.empty() ? lane_->error_text(name_, status) : message;
    error = std::make_exception_ptr(std::runtime_error(text));
  }
  for (auto& fn : on_done_) fn();
  on_done_.clear();
  copy_back_.clear();
  held_ = nullptr;
  // The work's own state first (a future callback may look at the work), then the future.
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace ccl_torch
