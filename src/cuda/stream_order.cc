#include "cuda/stream_order.h"

#include <sched.h>

#include <thread>

#include "base/error.h"
#include "cuda/cuda_driver.h"

#if CCL_HAVE_CUDA_H
#include "cuda/cuda_driver_api.h"
#endif

namespace ccl::cuda {

#if CCL_HAVE_CUDA_H

namespace {

using Clock = std::chrono::steady_clock;

std::atomic_ref<uint32_t> word_of(const PinnedBuffer& buffer) {
  return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(buffer.data()));
}

// Wrap-safe "a is at or past b", as CU_STREAM_WAIT_VALUE_GEQ compares.
bool reached(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

// The fallback hold: a host function on the CUDA stream that returns once the word reaches its
// operation. Bounded by the operation's own bounds: when the CUDA stream reaches the hold, the
// work before the operation is done, so the operation ends within its wait for that work and its
// run, each bounded by its timeout (CCL_TIMEOUT); past twice that (and a second) the CUDA stream
// is let go, and the ccl stream reports what went wrong. The bound matters more than it seems:
// CUDA runs every stream's host functions on one thread, so a hold that never returned would
// stop every stream's host functions of the process.
// How long ~StreamOrder waits for the CUDA stream to pass its last hold before it gives up and
// leaves the word allocated (4 bytes of pinned memory) rather than free memory still read.
constexpr auto kDrainLimit = std::chrono::seconds(10);

struct HostHold {
  std::atomic<uint32_t>* word;
  uint32_t seq;
  std::chrono::milliseconds limit;
};

void host_hold(void* data) {
  std::unique_ptr<HostHold> hold(static_cast<HostHold*>(data));
  const auto deadline = Clock::now() + hold->limit;
  for (int spins = 0; !reached(hold->word->load(std::memory_order_acquire), hold->seq); ++spins) {
    if (Clock::now() > deadline) return;
    if (spins < 1000) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace

StreamOrder::StreamOrder(void* cuda_stream) : stream_(cuda_stream) {
  const DriverApi& api = require_driver("cclStreamFromCuda");
  CUcontext context = nullptr;
  const CUresult status = api.stream_get_ctx(static_cast<CUstream>(cuda_stream), &context);
  if (status != CUDA_SUCCESS || context == nullptr) {
    // The legacy default stream (NULL) belongs to the current context, if this thread has one.
    if (cuda_stream == nullptr && api.ctx_get_current(&context) == CUDA_SUCCESS &&
        context != nullptr) {
      // taken below
    } else {
      throw_error(cclInvalidUsage,
                  "cclStreamFromCuda: the CUDA stream %p has no usable context (make the "
                  "stream's device current first, e.g. cudaSetDevice)",
                  cuda_stream);
    }
  }
  context_ = context;
  ContextScope scope(context_);
  word_.reserve(sizeof(uint32_t));
  word_of(word_).store(0, std::memory_order_release);
  word_device_ = word_.device_address();
}

StreamOrder::~StreamOrder() {
  // The ccl stream drained its operations first, but the CUDA stream may not have reached its
  // holds yet, and they read the word: free it only once the CUDA stream is past the last one
  // (its event, which stays valid even if the user destroyed the CUDA stream already), else
  // leave it allocated. Bounded: every hold is released already.
  const DriverApi* api = cuda_driver();
  if (api == nullptr || last_hold_ == nullptr) return;
  ContextScope scope(context_);
  const CUresult status =
      wait_for_event(*api, static_cast<CUevent>(last_hold_), Clock::now() + kDrainLimit);
  api->event_destroy(static_cast<CUevent>(last_hold_));
  if (status != CUDA_SUCCESS) word_.leak();  // the CUDA stream may still read it
}

StreamOrder::Ticket StreamOrder::begin() {
  const DriverApi& api = require_driver("cclStreamFromCuda");
  ContextScope scope(context_);
  CUevent event = nullptr;
  check(api, api.event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  const CUresult recorded = api.event_record(event, static_cast<CUstream>(stream_));
  if (recorded != CUDA_SUCCESS) {
    api.event_destroy(event);
    check(api, recorded, "cuEventRecord on the CUDA stream");
  }
  return Ticket{event, ++next_seq_};
}

void StreamOrder::hold(const Ticket& ticket, std::chrono::milliseconds timeout) {
  const DriverApi& api = require_driver("cclStreamFromCuda");
  ContextScope scope(context_);
  auto stream = static_cast<CUstream>(stream_);
  CUresult status = CUDA_ERROR_NOT_SUPPORTED;
  if (!host_func_) {
    status = api.stream_wait_value32(stream, word_device_, ticket.seq, CU_STREAM_WAIT_VALUE_GEQ);
    if (status != CUDA_SUCCESS && status != CUDA_ERROR_NOT_SUPPORTED) {
      check(api, status, "cuStreamWaitValue32");
    }
    // Else this device takes no stream memory operations: from now on, a host function.
    host_func_ = status == CUDA_ERROR_NOT_SUPPORTED;
  }
  if (host_func_) {
    auto* hold = new HostHold{reinterpret_cast<std::atomic<uint32_t>*>(word_.data()), ticket.seq,
                              2 * timeout + std::chrono::seconds(1)};
    status = api.launch_host_func(stream, host_hold, hold);
    if (status != CUDA_SUCCESS) {
      delete hold;
      check(api, status, "cuLaunchHostFunc");
    }
  }
  // Where the CUDA stream is past this hold (~StreamOrder frees the word only then).
  if (last_hold_ == nullptr) {
    CUevent event = nullptr;
    check(api, api.event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    last_hold_ = event;
  }
  check(api, api.event_record(static_cast<CUevent>(last_hold_), stream), "cuEventRecord");
}

cclResult_t StreamOrder::wait(const Ticket& ticket, std::chrono::milliseconds timeout) {
  const DriverApi& api = require_driver("cclStreamFromCuda");
  ContextScope scope(context_);
  const CUresult status =
      wait_for_event(api, static_cast<CUevent>(ticket.event), Clock::now() + timeout);
  if (status == CUDA_SUCCESS) return cclSuccess;
  return status == CUDA_ERROR_NOT_READY ? cclTimeout : cclUnhandledCudaError;
}

void StreamOrder::end(const Ticket& ticket) {
  word_of(word_).store(ticket.seq, std::memory_order_release);
  if (const DriverApi* api = cuda_driver()) api->event_destroy(static_cast<CUevent>(ticket.event));
}

#else

StreamOrder::StreamOrder(void*) { throw_no_driver("cclStreamFromCuda"); }
StreamOrder::~StreamOrder() = default;
StreamOrder::Ticket StreamOrder::begin() { return {}; }
void StreamOrder::hold(const Ticket&, std::chrono::milliseconds) {}
cclResult_t StreamOrder::wait(const Ticket&, std::chrono::milliseconds) { return cclSuccess; }
void StreamOrder::end(const Ticket&) {}

#endif

}  // namespace ccl::cuda
