#include "core/stream/stream_core.h"

#include <thread>

#include "base/config.h"
#include "base/error.h"

namespace ccl {

namespace {
using std::chrono::steady_clock;
// Added to the longest timeout of a stream's work before a waiter gives up: the work's own
// deadline expires first and reports what went wrong.
constexpr std::chrono::milliseconds kStallGrace{1000};
// A waiter polls (yielding) this long before it sleeps: hand-overs and short items finish
// within it, and a futex wake-up costs about 47 us here.
constexpr std::chrono::microseconds kPollBeforeSleep{50};
}  // namespace

StreamCore::StreamCore(std::chrono::microseconds idle_poll)
    : idle_poll_(idle_poll),
      queue_(kQueueSlots),
      longest_timeout_ms_(config_int("CCL_TIMEOUT") * 1000) {}

uint64_t StreamCore::enqueue(StreamWork work, std::chrono::milliseconds timeout) {
  int64_t longest = longest_timeout_ms_.load(std::memory_order_relaxed);
  while (timeout.count() > longest &&
         !longest_timeout_ms_.compare_exchange_weak(longest, timeout.count())) {
  }
  bool wake = false;
  uint64_t seq = 0;
  for (;;) {
    uint64_t must_complete = 0;
    {
      std::lock_guard lock(mutex_);
      if (!queue_.full()) {
        queue_.push(std::move(work));
        seq = ++enqueued_;
        enqueued_hint_.store(seq, std::memory_order_release);
        wake = worker_asleep_ && takers_ == 0;
        break;
      }
      // Full: the queueing thread runs the oldest items itself until it is half empty (a full
      // CUDA launch queue blocks the host the same way), one take-over per kQueueSlots / 2
      // items; then tries again (another thread may have filled it meanwhile).
      must_complete = enqueued_ - kQueueSlots / 2;
    }
    if (!run_until(must_complete)) throw_stalled("a stream with a full queue");
  }
  if (wake) work_ready_.notify_one();
  return seq;
}

uint64_t StreamCore::queued() const {
  std::lock_guard lock(mutex_);
  return enqueued_;
}

cclResult_t StreamCore::status(uint64_t seq) const {
  if (seq == 0) return cclSuccess;
  if (completed() < seq) return cclInProgress;
  // Written before completed_ (release), so visible here.
  return first_failure_seq_.load(std::memory_order_relaxed) <= seq ? first_failure_.load()
                                                                   : cclSuccess;
}

cclResult_t StreamCore::take_error() {
  std::lock_guard lock(mutex_);
  return std::exchange(sync_error_, cclSuccess);
}

cclResult_t StreamCore::peek_error() const {
  std::lock_guard lock(mutex_);
  return sync_error_;
}

std::chrono::milliseconds StreamCore::stall_bound() const {
  return std::chrono::milliseconds(longest_timeout_ms_.load()) + kStallGrace;
}

void StreamCore::throw_stalled(const char* what) const {
  throw_error(cclTimeout, "%s: the stream completed nothing for %lld ms", what,
              static_cast<long long>(stall_bound().count()));
}

bool StreamCore::pop(StreamWork* item, uint64_t* seq) {
  std::lock_guard lock(mutex_);
  if (queue_.empty()) return false;
  *item = queue_.pop();
  // One runner at a time, in order: the next item follows the last completed one.
  *seq = completed_.load(std::memory_order_relaxed) + 1;
  return true;
}

uint64_t StreamCore::pop_batch(uint64_t up_to) {
  std::lock_guard lock(mutex_);
  const uint64_t first = completed_.load(std::memory_order_relaxed) + 1;
  while (!queue_.empty() && first + batch_.size() <= up_to && batch_.size() < kBatchItems) {
    batch_.push_back(queue_.pop());
  }
  return first;
}

void StreamCore::run_one(StreamWork& item, uint64_t seq) {
  const cclResult_t result = item();
  // Dropped before the item counts as done: once a synchronize returns, the references the work
  // held (its communicator) are released.
  item.reset();
  if (result != cclSuccess) {
    if (first_failure_seq_.load(std::memory_order_relaxed) == UINT64_MAX) {
      first_failure_.store(result);
      first_failure_seq_.store(seq, std::memory_order_relaxed);
    }
    std::lock_guard lock(mutex_);
    if (sync_error_ == cclSuccess) sync_error_ = result;
  }
  completed_.store(seq, std::memory_order_release);
  bump_epoch();
}

void StreamCore::bump_epoch() {
  epoch_.fetch_add(1);  // seq_cst, against the sleeper's increment of sleepers_ (wait_for_change)
  if (sleepers_.load() > 0) {
    { std::lock_guard lock(mutex_); }  // a sleeper between its check and its wait gets the notify
    progress_.notify_all();
  }
}

bool StreamCore::wait_for_change(uint64_t seen, steady_clock::time_point deadline) {
  const auto poll_until = steady_clock::now() + kPollBeforeSleep;
  while (epoch_.load() == seen) {
    if (steady_clock::now() >= poll_until) break;
    std::this_thread::yield();
  }
  if (epoch_.load() != seen) return true;
  std::unique_lock lock(mutex_);
  sleepers_.fetch_add(1);
  bool changed = true;
  while (epoch_.load() == seen) {
    if (progress_.wait_until(lock, deadline) == std::cv_status::timeout) {
      changed = epoch_.load() != seen;
      break;
    }
  }
  sleepers_.fetch_sub(1);
  return changed;
}

bool StreamCore::reach(uint64_t seq, bool run) {
  seq = std::min(seq, queued());
  if (completed() >= seq) return true;
  if (run) {
    std::lock_guard lock(mutex_);
    takers_hint_.store(++takers_);
  }
  auto deadline = steady_clock::now() + stall_bound();
  bool reached = true;
  for (;;) {
    const uint64_t epoch = epoch_.load();
    const uint64_t done = completed();
    if (done >= seq) break;
    if (run && run_mutex_.try_lock()) {
      // Everything up to `seq` in one go: one lock of the queue, not one per item.
      const uint64_t first = pop_batch(seq);
      for (size_t i = 0; i < batch_.size(); ++i) run_one(batch_[i], first + i);
      batch_.clear();
      run_mutex_.unlock();
      // Another waiter may have found run_mutex_ taken after our last completion and gone to
      // sleep on that epoch: without a change it would sleep until its stall bound (torch's
      // Work.wait from several threads hit this: 60 s, then a timeout).
      bump_epoch();
      continue;
    }
    if (!wait_for_change(epoch, deadline)) {
      reached = false;
      break;
    }
    if (completed() != done) deadline = steady_clock::now() + stall_bound();
  }
  if (run) {
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      takers_hint_.store(--takers_);
      wake = takers_ == 0 && !queue_.empty() && worker_asleep_;
    }
    if (wake) work_ready_.notify_one();
  }
  return reached;
}

bool StreamCore::run_until(uint64_t seq) { return reach(seq, true); }

bool StreamCore::wait_until(uint64_t seq) { return reach(seq, false); }

void StreamCore::worker_loop() {
  StreamWork item;
  uint64_t seq = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      auto has_work = [&] { return stopping_ || (!queue_.empty() && takers_ == 0); };
      if (!has_work()) {
        if (takers_ == 0 && idle_poll_.count() > 0) {
          // Poll (yielding) before sleeping: see the constructor's comment in stream_core.h.
          const uint64_t seen = enqueued_;
          lock.unlock();
          const auto until = steady_clock::now() + idle_poll_;
          while (enqueued_hint_.load(std::memory_order_acquire) == seen &&
                 takers_hint_.load(std::memory_order_relaxed) == 0 && steady_clock::now() < until) {
            std::this_thread::yield();
          }
          lock.lock();
        }
        worker_asleep_ = true;
        work_ready_.wait(lock, has_work);
        worker_asleep_ = false;
      }
      if (stopping_ && queue_.empty()) return;
    }
    // A waiter may have taken over meanwhile; then has_work() is false until it is done.
    if (!run_mutex_.try_lock()) continue;
    while (takers_hint_.load(std::memory_order_relaxed) == 0 && pop(&item, &seq)) {
      run_one(item, seq);
    }
    run_mutex_.unlock();
    bump_epoch();  // a waiter that found run_mutex_ taken tries again
  }
}

void StreamCore::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
}

}  // namespace ccl
