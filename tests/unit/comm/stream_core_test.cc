// StreamCore's hand-overs between the threads that run a stream's work (queued calls, values:
// stream_work.h): its worker and any number of waiters, each waiting for its own point.
#include "core/stream/stream_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using ccl::StreamCore;
using ccl::StreamWork;

// The communicator of the queued calls: runs each call's `fn` (a test's action, numbered by the
// call's count).
class Target final : public ccl::CallTarget {
 public:
  explicit Target(std::function<void(size_t)> fn) : fn_(std::move(fn)) {}
  cclResult_t run_queued(std::span<const ccl::Call> calls) noexcept override {
    for (const ccl::Call& call : calls) fn_(call.count);
    return cclSuccess;
  }
  void poll_device() override {}
  cclResult_t async_error() const override { return cclSuccess; }

 private:
  std::function<void(size_t)> fn_;
};

StreamWork item(const std::shared_ptr<Target>& target, size_t n) {
  return StreamWork::of_call(
      target, ccl::make_call(ccl::OpKind::Barrier, "test", nullptr, nullptr, n, cclUint8));
}

// CCL_TIMEOUT for the scope (StreamCore reads it when constructed): a waiter that misses a
// hand-over gives up after CCL_TIMEOUT + 1 s instead of the default 301 s.
class ShortTimeout {
 public:
  ShortTimeout() {
    const char* old = getenv("CCL_TIMEOUT");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("CCL_TIMEOUT", "1", 1);
  }
  ~ShortTimeout() {
    if (had_) {
      setenv("CCL_TIMEOUT", old_.c_str(), 1);
    } else {
      unsetenv("CCL_TIMEOUT");
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

// Several threads wait for different points of one stream at once, each from its last point
// back (as torch's Work.wait from several threads, newest first): whoever finishes a batch hands
// the stream to the next waiter. A waiter that found the runner's lock taken just after the last
// completion and then slept until the next change would sleep until its stall bound: nothing
// else changes the stream once the runner lets go. Every wait must return having reached its
// point (it returns false only after the stall bound).
TEST(StreamCore, WaitersForManyPointsNeverMissAHandOver) {
  ShortTimeout short_timeout;
  StreamCore core(std::chrono::microseconds(100));
  std::thread worker([&] { core.worker_loop(); });
  constexpr int kRounds = 400;
  constexpr int kItems = 12;
  constexpr int kWaiters = 3;
  std::atomic<int> ran{0};
  std::atomic<int> missed{0};
  auto busy = std::make_shared<Target>([&ran](size_t) {
    // A few microseconds of work, so that runners overlap with waiters.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(150);
    while (std::chrono::steady_clock::now() < until) {
    }
    ran.fetch_add(1);
  });
  for (int round = 0; round < kRounds && missed.load() == 0; ++round) {
    std::vector<uint64_t> seqs;
    for (int i = 0; i < kItems; ++i) {
      seqs.push_back(core.enqueue(item(busy, 0), std::chrono::milliseconds(0)));
    }
    std::vector<std::thread> waiters;
    waiters.emplace_back([&] {  // point by point, in order (torch's watcher)
      for (const uint64_t seq : seqs) {
        if (!core.run_until(seq)) missed.fetch_add(1);
      }
    });
    for (int w = 0; w < kWaiters; ++w) {
      waiters.emplace_back([&, w] {
        for (int i = kItems - 1 - w; i >= 0; i -= kWaiters) {
          if (!core.run_until(seqs[static_cast<size_t>(i)])) missed.fetch_add(1);
          if (core.completed() < seqs[static_cast<size_t>(i)]) missed.fetch_add(1);
        }
      });
    }
    for (auto& t : waiters) t.join();
  }
  core.stop();
  worker.join();
  EXPECT_EQ(missed.load(), 0) << "a waiter gave up after the stall bound with work still queued";
  EXPECT_EQ(ran.load() % kItems, 0);
}

// A queue of kQueueSlots waiting items: the next enqueue runs the oldest half on the queueing
// thread first (the worker is never started here), in order, and the stream still runs every
// item exactly once, in order.
TEST(StreamCore, AFullQueueMakesTheQueueingThreadRunTheOldestHalf) {
  ShortTimeout short_timeout;
  StreamCore core(std::chrono::microseconds(0));
  const size_t slots = StreamCore::kQueueSlots;
  std::vector<uint64_t> order;
  std::vector<std::thread::id> runners;
  auto target = std::make_shared<Target>([&order, &runners](size_t n) {
    order.push_back(n);
    runners.push_back(std::this_thread::get_id());
  });
  for (uint64_t n = 1; n <= slots; ++n) core.enqueue(item(target, n), std::chrono::milliseconds(0));
  EXPECT_EQ(core.completed(), 0u);
  core.enqueue(item(target, slots + 1), std::chrono::milliseconds(0));
  EXPECT_EQ(core.completed(), slots / 2);
  ASSERT_EQ(order.size(), slots / 2);
  for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], i + 1);
  for (const auto& id : runners) EXPECT_EQ(id, std::this_thread::get_id());
  EXPECT_TRUE(core.run_until(core.queued()));
  ASSERT_EQ(order.size(), slots + 1);
  for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], i + 1);
  core.stop();
}

}  // namespace
