#include "core/stream.h"

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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  work_ready_.notify_one();
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
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
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
