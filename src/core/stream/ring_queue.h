// A FIFO of fixed capacity in one array (a power-of-two ring), allocated once: pushing and
// popping allocate nothing (std::deque allocates a block every few hundred bytes of items), and
// no push touches fresh memory (stream_core.h says what that cost). The owner keeps it from
// overflowing (full()). Not thread-safe: the stream guards it with its mutex.
#pragma once

#include <bit>
#include <cstddef>
#include <utility>
#include <vector>

namespace ccl {

template <class T>
class RingQueue {
 public:
  // Room for `capacity` items (rounded up to a power of two), allocated and touched now.
  explicit RingQueue(size_t capacity) : slots_(std::bit_ceil(capacity)) {}

  bool empty() const { return head_ == tail_; }
  bool full() const { return size() == slots_.size(); }
  size_t size() const { return tail_ - head_; }

  // The queue must not be full.
  void push(T value) { slots_[tail_++ & (slots_.size() - 1)] = std::move(value); }
  // The oldest item, moved out; the queue must not be empty.
  T pop() { return std::move(slots_[head_++ & (slots_.size() - 1)]); }

 private:
  std::vector<T> slots_;
  size_t head_ = 0;  // both count items ever popped / pushed; the slot is the count mod size
  size_t tail_ = 0;
};

}  // namespace ccl
