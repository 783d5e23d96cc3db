#include "core/stream.h"

#include <chrono>

namespace {
// How long an idle worker polls for new work before it sleeps.
constexpr std::chrono::microseconds kIdlePoll{200};
}  // namespace

cclStream::cclStream() : worker_([this] { worker_loop(); }) {}

cclStream::~cclStream() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && running_ == 0; });
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
}

void cclStream::enqueue(std::function<cclResult_t()> work) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
    queued_.fetch_add(1, std::memory_order_release);
    wake = worker_asleep_;
  }
  if (wake) work_ready_.notify_one();
}

cclResult_t cclStream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && running_ == 0; });
  cclResult_t result = first_error_;
  first_error_ = cclSuccess;
  return result;
}

cclResult_t cclStream::query() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!queue_.empty() || running_ != 0) return cclInProgress;
  return first_error_;
}

void cclStream::worker_loop() {
  // The worker takes everything queued in one go and runs it without the lock: a caller that
  // queues many small operations does not contend for the mutex once per operation.
  std::deque<std::function<cclResult_t()>> batch;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      // Poll (yielding) for a while before sleeping: see stream.h.
      const uint64_t seen = queued_.load(std::memory_order_acquire);
      lock.unlock();
      const auto until = std::chrono::steady_clock::now() + kIdlePoll;
      while (queued_.load(std::memory_order_acquire) == seen &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
      lock.lock();
      worker_asleep_ = true;
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      worker_asleep_ = false;
    }
    if (queue_.empty()) return;  // stopping and drained
    batch.swap(queue_);
    running_ = batch.size();
    lock.unlock();
    cclResult_t first = cclSuccess;
    for (auto& work : batch) {
      // Work items are guarded API bodies: they return a result and never throw.
      cclResult_t result = work();
      if (result != cclSuccess && first == cclSuccess) first = result;
    }
    batch.clear();
    lock.lock();
    running_ = 0;
    if (first != cclSuccess && first_error_ == cclSuccess) first_error_ = first;
    if (queue_.empty()) idle_.notify_all();
  }
}
