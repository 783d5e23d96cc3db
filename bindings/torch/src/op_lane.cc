#include "op_lane.h"

#include <c10/util/Exception.h>

#include "ccl_error.h"
#include "work_ccl.h"

namespace ccl_torch {

namespace {

// The lane whose work this thread is completing (its future's callbacks run here: user code on a
// watcher thread runs only there), and whether such a callback handed the driving to another
// thread of the pool.
thread_local const OpLane* t_completing_for = nullptr;
thread_local bool t_handed_off = false;

}  // namespace

OpLane::OpLane(cclComm_t comm, int rank, int size) : rank_(rank), size_(size), comm_(comm) {
  const cclResult_t r = cclStreamCreate(&stream_);
  if (r != cclSuccess) {
    cclCommDestroy(comm_);  // the lane owns it from the start
    TORCH_CHECK(false, "ccl: cclStreamCreate: ", cclGetErrorString(r));
  }
  watchers_.emplace_back([this] { watch(); });
}

OpLane::~OpLane() { shut_down(); }

std::string OpLane::describe_locked(const char* name, cclResult_t result) const {
  return ccl_error_text(name, result, comm_);
}

std::string OpLane::error_text(const char* name, cclResult_t result) const {
  std::shared_lock handle(handle_mutex_);
  return describe_locked(name, result);
}

void OpLane::raise(const char* name, cclResult_t result) const {
  throw_failure(result, error_text(name, result));
}

void OpLane::check_open_locked(const char* name) const {
  switch (state_.load()) {
    case State::kOpen:
      if (!stopped_) return;
      break;
    case State::kShrunk:
      TORCH_CHECK(false, "ccl ", name,
                  ": the process group was shrunk with abort=True; use the group that shrink "
                  "returned");
    case State::kAborted:
      TORCH_CHECK(false, "ccl ", name, ": the process group was aborted (abort)");
    case State::kShut:
      break;
  }
  TORCH_CHECK(false, "ccl ", name, ": the process group was destroyed");
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
  release_finished();
  std::lock_guard<std::mutex> lock(mutex_);
  check_open_locked(work->name());
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
  release_finished();
  std::lock_guard<std::mutex> lock(mutex_);
  check_open_locked(work->name());
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

void OpLane::fail_batch_locked(const std::string& text) {
  auto batch = std::move(batch_);
  batch_.clear();
  for (auto& work : batch) work->complete(cclRemoteError, text);
}

// Holding mutex_ keeps comm_ alive: stop() takes mutex_ before it frees the handle, and nothing
// holding mutex_ afterwards gets past check_open_locked.
void OpLane::run_exclusive(const std::function<void(cclComm_t)>& fn, const char* name) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_open_locked(name);
  post_batch_locked();
  // Bounded: every queued operation gives up after the communicator's timeout.
  const cclResult_t r = cclStreamSynchronize(stream_);
  if (r != cclSuccess) raise("cclStreamSynchronize", r);
  fn(comm_);
}

void OpLane::call(const char* name, const std::function<cclResult_t(cclComm_t)>& fn) {
  std::string text;
  cclResult_t r = cclSuccess;
  {
    std::shared_lock handle(handle_mutex_);
    // Refused from the moment an abort or a shut-down begins, before the handle is freed.
    const State state = state_.load();
    TORCH_CHECK(comm_ != nullptr && state != State::kAborted && state != State::kShut, "ccl ", name,
                ": the process group was ", state == State::kAborted ? "aborted" : "destroyed");
    r = fn(comm_);
    if (r == cclSuccess) return;
    text = describe_locked(name, r);
  }
  throw_failure(r, text);
}

void OpLane::mark_shrunk() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_.load() != State::kOpen) return;
  state_.store(State::kShrunk);
  fail_batch_locked(
      "ccl: the process group was shrunk with abort=True before this operation "
      "was posted");
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
    if (t_completing_for == this && !t_handed_off) {
      // A callback of one of this group's works issued this operation and may wait for it: the
      // driving passes to another watcher thread (op_lane.h).
      t_handed_off = true;
      driving_ = false;
      if (idle_ == 0 && watchers_.size() < kMaxWatchers && !stopping_) {
        watchers_.emplace_back([this] { watch(); });
      }
    }
  }
  watch_cv_.notify_one();
}

void OpLane::watch() {
  // Waits for the driving, then completes the queued works in order until the queue is empty or
  // a callback handed the driving on (hand_to_watcher).
  while (take_driving()) {
    while (c10::intrusive_ptr<WorkCcl> work = next_to_drive()) {
      complete(std::move(work));
      if (t_handed_off) break;
    }
  }
}

bool OpLane::take_driving() {
  std::unique_lock<std::mutex> lock(watch_mutex_);
  ++idle_;
  watch_cv_.wait(
      lock, [&] { return (!driving_ && !watched_.empty()) || (stopping_ && watched_.empty()); });
  --idle_;
  if (watched_.empty()) return false;  // stopping, and everything completed
  driving_ = true;
  return true;
}

c10::intrusive_ptr<WorkCcl> OpLane::next_to_drive() {
  std::lock_guard<std::mutex> lock(watch_mutex_);
  if (watched_.empty()) {
    driving_ = false;  // nothing to drive: any thread of the pool takes the next work
    if (stopping_) watch_cv_.notify_all();  // the others end too
    return {};
  }
  c10::intrusive_ptr<WorkCcl> work = std::move(watched_.front());
  watched_.pop_front();
  return work;
}

void OpLane::complete(c10::intrusive_ptr<WorkCcl> work) {
  // Bounded: cclEventSynchronize gives up after the communicator's timeout.
  t_completing_for = this;
  t_handed_off = false;
  work->drive();
  t_completing_for = nullptr;
  // Destroying a work may free a tensor that has a Python object, which takes the GIL; at the
  // interpreter's exit this thread may not take it any more (Python ends it inside the
  // destructor: std::terminate). So the last reference is left to a thread of the caller's.
  if (work.use_count() == 1) {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    finished_.push_back(std::move(work));
  }
}

void OpLane::release_finished() {
  std::vector<c10::intrusive_ptr<WorkCcl>> finished;
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    finished.swap(finished_);
  }
  // Destroyed here, holding no lock of the lane's (a thread holding the GIL may wait for one).
}

void OpLane::shut_down() {
  State open = State::kOpen;
  state_.compare_exchange_strong(open, State::kShut);
  stop(/*abort_comm=*/false);
}

void OpLane::abort() {
  // The watcher completes works, and runs their futures' callbacks: it cannot wait for itself.
  TORCH_CHECK(t_completing_for != this,
              "ccl abort: called from a work's callback (the thread that completes the group's "
              "works); call it from another thread");
  const State before = state_.exchange(State::kAborted);  // refuses new operations from now
  if (before == State::kShut) state_.store(State::kShut);
  if (before == State::kShut || before == State::kAborted) return;
  {
    // Ends every operation in flight now, here (a blocking call run_exclusive makes, whose
    // mutex_ stop() needs, included) and on the peers, instead of at the timeout.
    std::shared_lock handle(handle_mutex_);
    if (comm_ != nullptr) cclCommRevoke(comm_, 0);
  }
  stop(/*abort_comm=*/true);
}

void OpLane::stop(bool abort_comm) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    if (state_.load() == State::kShut) {
      post_batch_locked();  // a batch posted is waited for below, as every queued work
    } else {
      fail_batch_locked("ccl: the process group was aborted before this operation was posted");
    }
  }
  std::vector<std::thread> watchers;
  {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    stopping_ = true;  // no thread is added from now on
    watchers.swap(watchers_);
  }
  watch_cv_.notify_all();
  // Bounded: each queued work fails at once after an abort, or gives up after the timeout.
  for (auto& t : watchers) {
    if (t.joinable()) t.join();
  }
  release_finished();
  if (stream_ != nullptr) cclStreamDestroy(stream_);
  stream_ = nullptr;
  std::unique_lock handle(handle_mutex_);
  if (comm_ != nullptr) {
    if (abort_comm || first_failure_.load() != cclSuccess || state_.load() != State::kShut) {
      cclCommAbort(comm_);
    } else {
      cclCommDestroy(comm_);
    }
  }
  comm_ = nullptr;
}

}  // namespace ccl_torch
