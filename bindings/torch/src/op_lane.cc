#include "op_lane.h"

#include <c10/util/Exception.h>

#include "work_ccl.h"

namespace ccl_torch {

OpLane::OpLane(cclComm_t comm, int rank, int size) : rank_(rank), size_(size), comm_(comm) {
  const cclResult_t r = cclStreamCreate(&stream_);
  TORCH_CHECK(r == cclSuccess, "ccl: cclStreamCreate: ", cclGetErrorString(r));
  watcher_ = std::thread([this] { watch(); });
}

OpLane::~OpLane() { shut_down(); }

std::string OpLane::error_text(const char* name, cclResult_t result) const {
  std::string text = std::string("ccl ") + name + ": " + cclGetErrorString(result);
  const char* detail = comm_ != nullptr ? cclGetLastError(comm_) : nullptr;
  if (detail != nullptr && *detail != '\0') text += std::string(": ") + detail;
  return text;
}

at::Tensor OpLane::staging(const c10::intrusive_ptr<WorkCcl>& work, int64_t numel,
                           const at::TensorOptions& options) {
  const int64_t bytes =
      numel * static_cast<int64_t>(c10::elementSize(c10::typeMetaToScalarType(options.dtype())));
  at::Tensor raw;
  {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    // The smallest kept buffer that is large enough.
    size_t best = free_staging_.size();
    for (size_t i = 0; i < free_staging_.size(); ++i) {
      if (free_staging_[i].numel() >= bytes &&
          (best == free_staging_.size() ||
           free_staging_[i].numel() < free_staging_[best].numel())) {
        best = i;
      }
    }
    if (best < free_staging_.size()) {
      raw = std::move(free_staging_[best]);
      free_staging_.erase(free_staging_.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  if (!raw.defined()) raw = at::empty({std::max<int64_t>(bytes, 1)}, at::kByte);
  std::weak_ptr<OpLane> self = weak_from_this();
  work->on_done([self, raw] {
    if (auto lane = self.lock()) {
      std::lock_guard<std::mutex> lock(lane->staging_mutex_);
      if (lane->free_staging_.size() < kKept) lane->free_staging_.push_back(raw);
    }
  });
  return raw.narrow(0, 0, bytes).view(c10::typeMetaToScalarType(options.dtype()));
}

void OpLane::submit(const c10::intrusive_ptr<WorkCcl>& work, Launch launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!shut_, "ccl ", work->name(), ": the process group was destroyed");
  post_batch_locked();
  work->hold(std::move(launch));  // before the work can complete
  const cclResult_t r = work->held()(comm_, stream_);
  if (r != cclSuccess && r != cclInProgress) {
    const std::string text = error_text(work->name(), r);
    work->complete(r, text);
    TORCH_CHECK(false, text);
  }
  if (!start_watching(work)) std::rethrow_exception(work->exception());
}

void OpLane::submit_p2p(const c10::intrusive_ptr<WorkCcl>& work, Launch launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!shut_, "ccl ", work->name(), ": the process group was destroyed");
  work->hold(std::move(launch));
  batch_.push_back(work);
}

void OpLane::post_batch() {
  std::lock_guard<std::mutex> lock(mutex_);
  post_batch_locked();
}

void OpLane::post_batch_holding(const WorkCcl* work) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& entry : batch_) {
    if (entry.get() == work) {
      post_batch_locked();
      return;
    }
  }
}

void OpLane::post_batch_locked() {
  if (batch_.empty()) return;
  auto batch = std::move(batch_);
  batch_.clear();
  cclResult_t r = cclGroupStart();
  const char* failed_in = "cclGroupStart";
  if (r == cclSuccess) {
    for (auto& work : batch) {
      r = work->held()(comm_, stream_);
      if (r != cclSuccess && r != cclInProgress) {
        failed_in = work->name();
        break;
      }
    }
    const cclResult_t end = cclGroupEnd();
    if (r == cclSuccess || r == cclInProgress) {
      r = end;
      failed_in = "cclGroupEnd";
    }
  }
  if (r != cclSuccess && r != cclInProgress) {
    // Nothing of the batch was posted: every work of it fails with the reason.
    const std::string text = error_text(failed_in, r);
    for (auto& work : batch) work->complete(r, text);
    return;
  }
  for (auto& work : batch) start_watching(work);
}

void OpLane::run_exclusive(const std::function<void(cclComm_t)>& fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!shut_, "ccl: the process group was destroyed");
  post_batch_locked();
  // Bounded: every queued operation gives up after the communicator's timeout.
  const cclResult_t r = cclStreamSynchronize(stream_);
  TORCH_CHECK(r == cclSuccess, error_text("cclStreamSynchronize", r));
  fn(comm_);
}

bool OpLane::start_watching(const c10::intrusive_ptr<WorkCcl>& work) {
  const cclResult_t e = cclEventRecord(work->event(), stream_);
  if (e != cclSuccess) {
    work->complete(e, error_text("cclEventRecord", e));
    return false;
  }
  hand_to_watcher(work);
  return true;
}

void OpLane::hand_to_watcher(const c10::intrusive_ptr<WorkCcl>& work) {
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    watched_.push_back(work);
  }
  watch_cv_.notify_one();
}

void OpLane::watch() {
  for (;;) {
    c10::intrusive_ptr<WorkCcl> work;
    {
      std::unique_lock<std::mutex> lock(watch_mutex_);
      watch_cv_.wait(lock, [&] { return stopping_ || !watched_.empty(); });
      if (watched_.empty()) return;  // stopping, and everything completed
      work = watched_.front();
      watched_.pop_front();
    }
    // Bounded: cclEventSynchronize gives up after the communicator's timeout.
    work->drive();
  }
}

void OpLane::shut_down() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_) return;
    post_batch_locked();
    shut_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stopping_ = true;
  }
  watch_cv_.notify_one();
  if (watcher_.joinable()) watcher_.join();
  if (stream_ != nullptr) cclStreamDestroy(stream_);
  stream_ = nullptr;
  if (comm_ != nullptr) {
    if (failed_.load()) {
      cclCommAbort(comm_);
    } else {
      cclCommDestroy(comm_);
    }
  }
  comm_ = nullptr;
}

}  // namespace ccl_torch
