#include "core/stream/stream.h"

#include <algorithm>

#include "base/config.h"
#include "base/deadline.h"
#include "base/error.h"
#include "cuda/stream_ops.h"

namespace {
// How long an idle worker polls for new work (yielding its core) before it sleeps: CCL_YIELD_US,
// the executor's yield phase. It does not spin first: the thread that queues needs the core.
std::chrono::microseconds idle_poll() {
  return std::chrono::microseconds(ccl::config_int("CCL_YIELD_US"));
}
}  // namespace

cclStream::cclStream()
    : core_(std::make_shared<ccl::StreamCore>(idle_poll())),
      worker_([core = core_] { core->worker_loop(); }) {}

cclStream::cclStream(struct CUstream_st* cuda_stream)
    : core_(std::make_shared<ccl::StreamCore>(idle_poll())),
      cuda_(std::make_unique<ccl::cuda::StreamOrder>(cuda_stream)),
      worker_([core = core_] { core->worker_loop(); }) {}

void cclStream::enqueue(ccl::StreamWork work, std::chrono::milliseconds timeout, const char* what) {
  if (!cuda_) {
    core_->enqueue(std::move(work), timeout);
    return;
  }
  std::lock_guard lock(cuda_enqueue_);
  {
    const ccl::cuda::ContextScope scope(cuda_->context());
    if (ccl::cuda::is_capturing(cuda_->stream())) {
      ccl::throw_error(cclInvalidUsage,
                       "%s: the CUDA stream is capturing a graph, and this operation runs on the "
                       "host (host buffers, ranks on several hosts, or a communicator without "
                       "device collectives): it cannot be captured",
                       what);
    }
  }
  work.order = cuda_.get();  // outlives the work: ~cclStream drains first
  work.ticket = cuda_->begin();
  work.timeout = timeout;
  const ccl::cuda::StreamOrder::Ticket ticket = work.ticket;
  core_->enqueue(std::move(work), timeout);
  cuda_->hold(ticket, timeout);
}

cclStream::~cclStream() {
  // Every queued item is bounded by its communicator's deadline, so the join is bounded too.
  (void)drain();
  core_->stop();
  worker_.join();
}

ccl::StreamPoint cclStream::point() {
  ccl::StreamPoint p{core_, core_->queued(), nullptr};
  if (!cuda_) return p;
  std::lock_guard lock(cuda_enqueue_);
  if (device_comms_.empty()) return p;
  const ccl::cuda::ContextScope scope(cuda_->context());
  if (ccl::cuda::is_capturing(cuda_->stream())) return p;
  auto mark = std::make_shared<ccl::DeviceMark>();
  mark->context = cuda_->context();
  mark->event = std::make_unique<ccl::cuda::Event>();
  mark->event->record(cuda_->stream());
  mark->comms = device_comms_;
  p.device = std::move(mark);
  return p;
}

void cclStream::wait_on_cuda(const ccl::cuda::Event& event) {
  std::lock_guard lock(cuda_enqueue_);
  const ccl::cuda::ContextScope scope(cuda_->context());
  ccl::cuda::stream_wait_event(cuda_->stream(), event);
}

void cclStream::note_device_work(const std::shared_ptr<ccl::CallTarget>& comm) {
  for (const auto& known : device_comms_) {
    if (known.lock() == comm) return;
  }
  std::erase_if(device_comms_, [](const auto& c) { return c.expired(); });
  device_comms_.push_back(comm);
}

cclResult_t cclStream::device_status(bool wait) {
  std::vector<std::shared_ptr<ccl::CallTarget>> comms;
  {
    std::lock_guard lock(cuda_enqueue_);
    for (const auto& c : device_comms_) {
      if (auto comm = c.lock()) comms.push_back(comm);
    }
  }
  if (comms.empty()) return cclSuccess;
  const ccl::cuda::ContextScope scope(cuda_->context());
  if (ccl::cuda::is_capturing(cuda_->stream())) {
    ccl::throw_error(cclInvalidUsage,
                     "the CUDA stream is capturing a graph: it cannot be synchronized");
  }
  ccl::cuda::Event end;
  end.record(cuda_->stream());
  const ccl::Deadline until = ccl::Deadline::after(core_->stall_bound());
  for (int polls = 0; !end.done(); ++polls) {
    for (const auto& comm : comms) {
      if (comm->async_error() != cclSuccess) return comm->async_error();
    }
    if (!wait) return cclInProgress;
    if (until.expired()) core_->throw_stalled("cclStreamSynchronize (the CUDA stream)");
    ccl::poll_pause(polls);
  }
  for (const auto& comm : comms) {
    comm->poll_device();  // the watchdog may not have looked since the stream went past it
    if (comm->async_error() != cclSuccess) return comm->async_error();
  }
  return cclSuccess;
}

cclResult_t cclStream::synchronize() {
  if (!drain()) core_->throw_stalled("cclStreamSynchronize");
  const cclResult_t host = core_->take_error();
  if (host != cclSuccess || !cuda_) return host;
  return device_status(true);
}

cclResult_t cclStream::query() {
  if (core_->completed() < core_->queued()) return cclInProgress;
  const cclResult_t host = core_->peek_error();
  if (host != cclSuccess || !cuda_) return host;
  return device_status(false);
}
