#include "core/stream.h"

#include "base/config.h"

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

void cclStream::enqueue(ccl::WorkItem work, std::chrono::milliseconds timeout) {
  if (!cuda_) {
    core_->enqueue(std::move(work), timeout);
    return;
  }
  std::lock_guard lock(cuda_enqueue_);
  const ccl::cuda::StreamOrder::Ticket ticket = cuda_->begin();
  ccl::cuda::StreamOrder* order = cuda_.get();  // outlives the work: ~cclStream drains first
  core_->enqueue(
      [order, ticket, timeout, work = std::move(work)]() mutable {
        const cclResult_t waited = order->wait(ticket, timeout);
        const ccl::cuda::OrderedByCudaStream ordered;  // the wait above ordered its device work
        const cclResult_t result = work();
        order->end(ticket);
        return waited != cclSuccess ? waited : result;
      },
      timeout);
  cuda_->hold(ticket);
}

cclStream::~cclStream() {
  // Every queued item is bounded by its communicator's deadline, so the join is bounded too.
  (void)drain();
  core_->stop();
  worker_.join();
}

cclResult_t cclStream::synchronize() {
  if (!drain()) core_->throw_stalled("cclStreamSynchronize");
  return core_->take_error();
}

cclResult_t cclStream::query() {
  if (core_->completed() < core_->queued()) return cclInProgress;
  return core_->peek_error();
}
