// A FIFO in one growing array (a power-of-two ring): after its first few pushes, pushing and
// popping allocate nothing (std::deque allocates a block every few hundred bytes of items).
// Not thread-safe: the stream guards it with its mutex.
#pragma once

#include <bit>
#include <cstddef>
#include <utility>
#include <vector>

namespace ccl {

template <class T>
class RingQueue {
 public:
  RingQueue() = default;
  // Room for `capacity` items (rounded up to a power of two) from the start.
  explicit RingQueue(size_t capacity) : slots_(std::bit_ceil(capacity)) {}

  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }

  void push(T value) {
    if (size() == slots_.size()) grow();
    slots_[tail_++ & (slots_.size() - 1)] = std::move(value);
  }
  // The oldest item, moved out; the queue must not be empty.
  T pop() { return std::move(slots_[head_++ & (slots_.size() - 1)]); }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 64 : slots_.size() * 2);
    size_t n = 0;
    while (!empty()) bigger[n++] = pop();
    slots_ = std::move(bigger);
    head_ = 0;
    tail_ = n;
  }

  std::vector<T> slots_;
  size_t head_ = 0;  // both count items ever popped / pushed; the slot is the count mod size
  size_t tail_ = 0;
};

}  // namespace ccl
