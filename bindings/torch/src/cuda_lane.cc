#include "cuda_lane.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

#include "ccl_error.h"
#include "op_lane.h"

namespace ccl_torch {

namespace {

// The CUDA guard of torch's (registered by libc10_cuda, which `import torch` loads in a CUDA
// build): streams, events and the caching allocator, without a CUDA header here.
const c10::impl::VirtualGuardImpl& cuda_guard() {
  static const c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
  return guard;
}

// A stream of torch's pool on `device`, as ProcessGroupNCCL takes one per device.
c10::Stream pool_stream(const char* op, c10::Device device) {
  TORCH_CHECK(device.is_cuda() && device.has_index(), "ccl ", op, ": ", device,
              " is not a CUDA device with an index");
  return cuda_guard().getStreamFromGlobalPool(device, /*isHighPriority=*/false);
}

cclComm_t split_on(OpLane& parent, const char* op, c10::Device device,
                   std::chrono::milliseconds timeout) {
  // The device's context current on this thread while ccl makes the communicator: ccl builds
  // its device world from the context current at init (docs/cuda.md).
  const c10::DeviceGuard on_device(device);
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT32_MAX));
  config.commName = "torch.distributed cuda";
  cclComm_t child = nullptr;
  parent.run_exclusive(
      [&](cclComm_t comm) {
        const cclResult_t r = cclCommSplit(comm, 0, parent.rank(), &child, &config);
        if (r != cclSuccess) parent.raise("cclCommSplit (the group's CUDA communicator)", r);
      },
      op);
  TORCH_CHECK(child != nullptr, "ccl ", op, ": cclCommSplit made no CUDA communicator");
  return child;
}

}  // namespace

CudaLane::CudaLane(OpLane& parent, const char* op, c10::Device device,
                   std::chrono::milliseconds timeout)
    : device_(device), stream_(pool_stream(op, device)) {
  comm_ = split_on(parent, op, device, timeout);
  const cclResult_t r =
      cclStreamFromCuda(static_cast<CUstream_st*>(stream_.native_handle()), &ccl_stream_);
  if (r != cclSuccess) {
    const std::string text = ccl_error_text("cclStreamFromCuda", r, comm_);
    cclCommDestroy(comm_);
    throw_failure(r, std::string("ccl ") + op + ": " + text);
  }
}

CudaLane::~CudaLane() {
  std::lock_guard<std::mutex> lock(mutex_);
  cclResult_t failed = cclSuccess;
  if (!aborted_) {
    post_batch_locked_quietly();
    // Bounded: a device program that does not end within the communicator's timeout is
    // released by ccl's watchdog, which fails the communicator.
    try {
      stream_.synchronize();
    } catch (const std::exception&) {
      failed = cclUnhandledCudaError;
    }
    if (failed == cclSuccess) cclCommGetAsyncError(comm_, &failed);
  }
  cclStreamDestroy(ccl_stream_);
  if (comm_ == nullptr) return;  // aborted: abort() freed it
  for (const auto& [key, op] : premul_) cclRedOpDestroy(op, comm_);
  if (failed != cclSuccess) {
    cclCommAbort(comm_);
  } else {
    cclCommDestroy(comm_);
  }
}

c10::Stream CudaLane::caller_stream() const { return cuda_guard().getStream(device_); }

void CudaLane::raise(const char* op, const char* call, cclResult_t r) const {
  throw_failure(r, std::string("ccl ") + op + ": " + ccl_error_text(call, r, comm_));
}

void CudaLane::check_async(const char* op) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!aborted_, "ccl ", op, ": the process group was aborted (abort)");
  cclResult_t async = cclSuccess;
  const cclResult_t r = cclCommGetAsyncError(comm_, &async);
  if (r != cclSuccess) raise(op, "cclCommGetAsyncError", r);
  if (async != cclSuccess && async != cclInProgress) raise(op, "the CUDA communicator", async);
}

void CudaLane::drain(const char* op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!aborted_, "ccl ", op, ": the process group was aborted (abort)");
    post_batch_locked();
    stream_.synchronize();
  }
  check_async(op);
}

void CudaLane::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) return;
  aborted_ = true;
  cclCommAbort(comm_);  // releases every device program of the communicator, here and on peers
  comm_ = nullptr;
  for (const auto& work : batch_) work->fail_on_device("ccl: the process group was aborted");
  batch_.clear();
}

cclRedOp_t CudaLane::premul_op(const at::Tensor& factor, cclDataType_t type) {
  uint64_t bits = 0;
  std::memcpy(&bits, factor.data_ptr(),
              std::min<size_t>(sizeof bits, static_cast<size_t>(factor.element_size())));
  const auto key = std::make_pair(type, bits);
  if (const auto it = premul_.find(key); it != premul_.end()) return it->second;
  // A bound on ops kept for the lane's life; a training loop uses a handful (1/world size).
  constexpr size_t kMaxKept = 1024;
  TORCH_CHECK(premul_.size() < kMaxKept, "ccl PREMUL_SUM: more than ", kMaxKept,
              " distinct factors on one CUDA process group");
  cclRedOp_t op = cclSum;
  const cclResult_t r = cclRedOpCreatePreMulSum(&op, factor.data_ptr(), type, 0, comm_);
  if (r != cclSuccess) raise("PREMUL_SUM", "cclRedOpCreatePreMulSum", r);
  premul_.emplace(key, op);
  return op;
}

void CudaLane::submit(const c10::intrusive_ptr<WorkCcl>& work, Launch launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!aborted_, "ccl ", work->name(), ": the process group was aborted (abort)");
  post_batch_locked();
  enqueue_locked({work}, work->name(), launch);
}

void CudaLane::submit_p2p(const c10::intrusive_ptr<WorkCcl>& work, Launch launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!aborted_, "ccl ", work->name(), ": the process group was aborted (abort)");
  work->hold(std::move(launch));
  batch_.push_back(work);
}

void CudaLane::post_batch_holding(const WorkCcl* work) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool held = std::any_of(batch_.begin(), batch_.end(),
                                [&](const auto& entry) { return entry.get() == work; });
  if (held) post_batch_locked();
}

void CudaLane::post_batch_locked() {
  if (batch_.empty()) return;
  std::vector<c10::intrusive_ptr<WorkCcl>> works;
  works.swap(batch_);
  enqueue_locked(works, "send/recv", [&works](cclComm_t comm, cclStream_t stream) {
    cclResult_t r = cclGroupStart();
    for (const auto& w : works) {
      if (r != cclSuccess) break;
      r = w->held()(comm, stream);
    }
    const cclResult_t end = cclGroupEnd();
    return r != cclSuccess ? r : end;
  });
}

void CudaLane::post_batch_locked_quietly() {
  try {
    post_batch_locked();
  } catch (const std::exception&) {
    // The works of the batch carry the error; the lane is closing.
  }
}

void CudaLane::enqueue_locked(const std::vector<c10::intrusive_ptr<WorkCcl>>& works,
                              const char* name, const Launch& launch) {
  const c10::DeviceGuard on_device(device_);
  // The lane's stream waits for what the caller queued before the call (its inputs).
  c10::Event ready(c10::DeviceType::CUDA);
  ready.record(caller_stream());
  ready.block(stream_);
  const c10::StreamGuard on_lane(stream_);
  const cclResult_t r = launch(comm_, ccl_stream_);
  if (r != cclSuccess && r != cclInProgress) {
    const std::string text = ccl_error_text(name, r, comm_);
    for (const auto& w : works) w->fail_on_device(text);
    throw_failure(r, text);
  }
  for (const auto& w : works) w->enqueued_on(stream_);
}

}  // namespace ccl_torch
