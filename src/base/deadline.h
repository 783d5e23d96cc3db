// Every wait in ccl is bounded: it takes a Deadline and an abort flag.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace ccl {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(std::chrono::milliseconds ms) { return Deadline(Clock::now() + ms); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  bool expired() const { return Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  // Time left, clamped to [0, cap].
  std::chrono::microseconds remaining(std::chrono::microseconds cap) const {
    auto now = Clock::now();
    if (now >= at_) return std::chrono::microseconds(0);
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(at_ - now);
    return left < cap ? left : cap;
  }

 private:
  Clock::time_point at_;
};

// The pause between two looks of a host-side poll (a CUDA event, a stream's point, a device
// program), `polls` looks in: the core is yielded for the first 200, then the poller sleeps 20 us
// a look, so that a long wait holds no core. The poll's deadline bounds it.
inline void poll_pause(int polls) {
  if (polls < 200) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Shared by everything that waits on behalf of one communicator; cclCommAbort sets it.
using AbortFlag = std::atomic<bool>;

}  // namespace ccl
