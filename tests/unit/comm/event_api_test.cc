// Events through the C API (and ccl::Event), ranks as threads of this process: recorded, queried
// and synchronized from several threads, across streams (cclStreamWaitEvent), after a failed or
// timed-out operation, and destroyed with work pending. Every wait here is bounded.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "ccl/ccl.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Runs body(rank, comm) on `nranks` threads, each with a communicator of one group (timeout
// `timeout_ms`); destroys them after every body returned.
void with_ranks(int nranks, int timeout_ms, const std::function<void(int, cclComm_t)>& body) {
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<cclComm_t> comms(nranks, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      cclConfig_t config = CCL_CONFIG_INITIALIZER;
      config.timeoutMs = timeout_ms;
      ASSERT_EQ(cclCommInitRankConfig(&comms[r], nranks, id, r, &config), cclSuccess);
      body(r, comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (cclComm_t c : comms) {
    if (c != nullptr) {
      EXPECT_EQ(cclCommDestroy(c), cclSuccess);
    }
  }
}

// Joins its threads when it goes out of scope, also when an ASSERT returns early (a joinable
// std::thread destroyed would terminate the whole test binary).
struct JoinAll {
  std::vector<std::thread> threads;
  ~JoinAll() {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

// Spins (yielding) until `flag` is set, for at most 20 s.
void await(const std::atomic<bool>& flag) {
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (!flag.load() && Clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(flag.load()) << "not set within 20 s";
}

TEST(Event, NeverRecordedCountsAsComplete) {
  cclEvent_t event = nullptr;
  ASSERT_EQ(cclEventCreate(&event), cclSuccess);
  EXPECT_EQ(cclEventQuery(event), cclSuccess);
  EXPECT_EQ(cclEventSynchronize(event), cclSuccess);
  cclStream_t stream = nullptr;
  ASSERT_EQ(cclStreamCreate(&stream), cclSuccess);
  EXPECT_EQ(cclStreamWaitEvent(stream, event), cclSuccess);
  EXPECT_EQ(cclStreamSynchronize(stream), cclSuccess);
  // Recorded on an empty stream, or on the NULL stream: nothing to wait for.
  EXPECT_EQ(cclEventRecord(event, stream), cclSuccess);
  EXPECT_EQ(cclEventQuery(event), cclSuccess);
  EXPECT_EQ(cclEventRecord(event, nullptr), cclSuccess);
  EXPECT_EQ(cclEventSynchronize(event), cclSuccess);
  EXPECT_EQ(cclStreamWaitEvent(nullptr, event), cclSuccess);
  EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
  EXPECT_EQ(cclEventDestroy(event), cclSuccess);
}

TEST(Event, BadHandlesAreInvalidArguments) {
  EXPECT_EQ(cclEventCreate(nullptr), cclInvalidArgument);
  EXPECT_NE(std::string(cclGetLastError(nullptr)).find("event is NULL"), std::string::npos);
  EXPECT_EQ(cclEventQuery(nullptr), cclInvalidArgument);
  EXPECT_EQ(cclEventSynchronize(nullptr), cclInvalidArgument);
  EXPECT_EQ(cclEventRecord(nullptr, nullptr), cclInvalidArgument);
  EXPECT_EQ(cclEventDestroy(nullptr), cclInvalidArgument);
  cclStream_t stream = nullptr;
  ASSERT_EQ(cclStreamCreate(&stream), cclSuccess);
  EXPECT_EQ(cclStreamWaitEvent(stream, nullptr), cclInvalidArgument);
  // A stream handle passed as an event, and the other way round.
  EXPECT_EQ(cclEventQuery(reinterpret_cast<cclEvent_t>(stream)), cclInvalidArgument);
  EXPECT_NE(std::string(cclGetLastError(nullptr)).find("not a valid cclEvent_t"),
            std::string::npos);
  cclEvent_t event = nullptr;
  ASSERT_EQ(cclEventCreate(&event), cclSuccess);
  EXPECT_EQ(cclEventRecord(event, reinterpret_cast<cclStream_t>(event)), cclInvalidArgument);
  EXPECT_EQ(cclEventDestroy(event), cclSuccess);
  EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
}

// One rank thread queues kOps allreduces, each into its own buffer, recording an event after
// each; three other threads per rank synchronize or poll the events in different orders and
// check each buffer as soon as its event says done.
TEST(Event, ManyThreadsQueryAndSynchronize) {
  constexpr int kRanks = 2;
  constexpr int kOps = 24;
  constexpr size_t kCount = 4099;
  with_ranks(kRanks, 20000, [&](int rank, cclComm_t comm) {
    std::vector<std::vector<int>> bufs(kOps, std::vector<int>(kCount));
    std::vector<cclEvent_t> events(kOps);
    for (auto& e : events) ASSERT_EQ(cclEventCreate(&e), cclSuccess);
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamCreate(&stream), cclSuccess);
    std::atomic<int> recorded{0};  // events[k] is recorded once recorded > k
    auto await_recorded = [&](int k) {
      const auto until = Clock::now() + std::chrono::seconds(20);
      while (recorded.load() <= k && Clock::now() < until) std::this_thread::yield();
      ASSERT_GT(recorded.load(), k);
    };
    std::atomic<int> checked{0};
    auto check = [&](int k) {
      // Op k reduces (rank + 1) * (k + 1) + i over the ranks.
      for (size_t i = 0; i < kCount; i += 97) {
        const int want = (kRanks * (kRanks + 1) / 2) * (k + 1) + kRanks * static_cast<int>(i);
        if (bufs[k][i] != want) {
          ADD_FAILURE() << "op " << k << " element " << i << ": " << bufs[k][i] << " != " << want;
          return;
        }
      }
      checked.fetch_add(1);
    };
    JoinAll joined;
    std::vector<std::thread>& waiters = joined.threads;
    waiters.emplace_back([&] {  // synchronizes in order
      for (int k = 0; k < kOps; ++k) {
        await_recorded(k);
        ASSERT_EQ(cclEventSynchronize(events[k]), cclSuccess);
        check(k);
      }
    });
    waiters.emplace_back([&] {  // synchronizes backwards: the last one implies all
      await_recorded(kOps - 1);
      for (int k = kOps - 1; k >= 0; --k) {
        ASSERT_EQ(cclEventSynchronize(events[k]), cclSuccess);
        check(k);
      }
    });
    waiters.emplace_back([&] {  // polls, bounded
      const auto until = Clock::now() + std::chrono::seconds(20);
      for (int k = 0; k < kOps; ++k) {
        await_recorded(k);
        cclResult_t r = cclInProgress;
        while ((r = cclEventQuery(events[k])) == cclInProgress && Clock::now() < until) {
          std::this_thread::yield();
        }
        ASSERT_EQ(r, cclSuccess) << "event " << k;
        check(k);
      }
    });
    for (int k = 0; k < kOps; ++k) {
      for (size_t i = 0; i < kCount; ++i) {
        bufs[k][i] = (rank + 1) * (k + 1) + static_cast<int>(i);
      }
      ASSERT_EQ(
          cclAllReduce(bufs[k].data(), bufs[k].data(), kCount, cclInt32, cclSum, comm, stream),
          cclSuccess);
      ASSERT_EQ(cclEventRecord(events[k], stream), cclSuccess);
      recorded.store(k + 1);
    }
    for (auto& t : waiters) t.join();  // before the checks below
    EXPECT_EQ(checked.load(), 3 * kOps);
    EXPECT_EQ(cclStreamSynchronize(stream), cclSuccess);
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
    for (auto e : events) EXPECT_EQ(cclEventDestroy(e), cclSuccess);
  });
}

// Stream B's allreduce reads what stream A's allreduce wrote: cclStreamWaitEvent orders them on
// every rank (without it the two streams could issue them in different orders on the ranks).
TEST(Event, StreamWaitEventOrdersWorkAcrossStreams) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1 << 18;
  with_ranks(kRanks, 20000, [&](int rank, cclComm_t comm) {
    cclStream_t a = nullptr, b = nullptr;
    ASSERT_EQ(cclStreamCreate(&a), cclSuccess);
    ASSERT_EQ(cclStreamCreate(&b), cclSuccess);
    cclEvent_t reduced = nullptr;
    ASSERT_EQ(cclEventCreate(&reduced), cclSuccess);
    for (int round = 0; round < 3; ++round) {
      std::vector<float> x(kCount, static_cast<float>(rank + 1));
      std::vector<float> y(kCount, -1.0f);
      ASSERT_EQ(cclAllReduce(x.data(), x.data(), kCount, cclFloat32, cclSum, comm, a), cclSuccess);
      ASSERT_EQ(cclEventRecord(reduced, a), cclSuccess);
      ASSERT_EQ(cclStreamWaitEvent(b, reduced), cclSuccess);
      ASSERT_EQ(cclAllReduce(x.data(), y.data(), kCount, cclFloat32, cclSum, comm, b), cclSuccess);
      ASSERT_EQ(cclStreamSynchronize(b), cclSuccess) << cclGetLastError(comm);
      EXPECT_EQ(cclEventQuery(reduced), cclSuccess);  // b waited for it
      const float sum = kRanks * (kRanks + 1) / 2.0f;
      EXPECT_EQ(y[0], kRanks * sum);
      EXPECT_EQ(y[kCount - 1], kRanks * sum);
      ASSERT_EQ(cclStreamSynchronize(a), cclSuccess);
    }
    EXPECT_EQ(cclEventDestroy(reduced), cclSuccess);
    EXPECT_EQ(cclStreamDestroy(a), cclSuccess);
    EXPECT_EQ(cclStreamDestroy(b), cclSuccess);
  });
}

// Rank 0's allreduce waits for rank 1, which holds back until rank 0 has seen its event pending:
// the event is cclInProgress until then, and recording again moves it to the newer work.
TEST(Event, PendingUntilThePeerJoinsAndReRecordingMovesIt) {
  constexpr int kRanks = 2;
  std::atomic<bool> seen_pending{false};
  with_ranks(kRanks, 20000, [&](int rank, cclComm_t comm) {
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamCreate(&stream), cclSuccess);
    cclEvent_t event = nullptr;
    ASSERT_EQ(cclEventCreate(&event), cclSuccess);
    int first = rank + 1;
    ASSERT_EQ(cclAllReduce(&first, &first, 1, cclInt32, cclSum, comm, stream), cclSuccess);
    ASSERT_EQ(cclEventRecord(event, stream), cclSuccess);
    ASSERT_EQ(cclEventSynchronize(event), cclSuccess);
    EXPECT_EQ(first, 3);
    int second = 10 * (rank + 1);
    if (rank == 1) await(seen_pending);
    ASSERT_EQ(cclAllReduce(&second, &second, 1, cclInt32, cclSum, comm, stream), cclSuccess);
    EXPECT_EQ(cclEventQuery(event), cclSuccess) << "still the first allreduce's point";
    ASSERT_EQ(cclEventRecord(event, stream), cclSuccess);
    if (rank == 0) {
      EXPECT_EQ(cclEventQuery(event), cclInProgress) << "rank 1 has not called it yet";
      seen_pending.store(true);
    }
    EXPECT_EQ(cclEventSynchronize(event), cclSuccess);
    EXPECT_EQ(second, 30);
    EXPECT_EQ(cclEventDestroy(event), cclSuccess);
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
  });
}

// Rank 1 never calls the allreduce: rank 0's times out. Events recorded after it report
// cclTimeout, also after cclStreamSynchronize returned (and cleared) the stream's error, and a
// stream that waits on such an event reports it too.
TEST(Event, AfterATimedOutOperationReportsTheTimeout) {
  constexpr int kRanks = 2;
  std::atomic<bool> done{false};
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  JoinAll joined;  // the idle rank is told to go (done) before it is joined, on every path
  struct SetOnExit {
    std::atomic<bool>& flag;
    ~SetOnExit() { flag.store(true); }
  };
  const SetOnExit release{done};
  std::thread& idle = joined.threads.emplace_back([&] {
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.timeoutMs = 20000;
    cclComm_t comm = nullptr;
    ASSERT_EQ(cclCommInitRankConfig(&comm, kRanks, id, 1, &config), cclSuccess);
    await(done);
    (void)cclCommAbort(comm);
  });
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  // Long enough for init under TSan on a loaded machine (400 ms was not), short for the test.
  config.timeoutMs = 3000;
  cclComm_t comm = nullptr;
  ASSERT_EQ(cclCommInitRankConfig(&comm, kRanks, id, 0, &config), cclSuccess);
  cclStream_t stream = nullptr, other = nullptr;
  ASSERT_EQ(cclStreamCreate(&stream), cclSuccess);
  ASSERT_EQ(cclStreamCreate(&other), cclSuccess);
  cclEvent_t after = nullptr, later = nullptr;
  ASSERT_EQ(cclEventCreate(&after), cclSuccess);
  ASSERT_EQ(cclEventCreate(&later), cclSuccess);
  std::vector<float> x(1000, 1.0f);
  ASSERT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, stream),
            cclSuccess);
  ASSERT_EQ(cclEventRecord(after, stream), cclSuccess);
  ASSERT_EQ(cclStreamWaitEvent(other, after), cclSuccess);
  const auto start = Clock::now();
  EXPECT_EQ(cclEventSynchronize(after), cclTimeout);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(std::string(cclGetLastError(comm)).find("timed out"), std::string::npos)
      << cclGetLastError(comm);
  EXPECT_EQ(cclEventQuery(after), cclTimeout);
  EXPECT_EQ(cclStreamSynchronize(other), cclTimeout) << "the wait reports the work it waited for";
  EXPECT_EQ(cclStreamSynchronize(stream), cclTimeout);
  EXPECT_EQ(cclStreamSynchronize(stream), cclSuccess) << "synchronize clears its own error";
  ASSERT_EQ(cclEventRecord(later, stream), cclSuccess);
  EXPECT_EQ(cclEventQuery(later), cclTimeout) << "but events after the failure keep reporting it";
  EXPECT_EQ(cclEventSynchronize(later), cclTimeout);
  // Work after the failure fails too (the communicator is unusable), and so do its events.
  ASSERT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, stream),
            cclSuccess);
  ASSERT_EQ(cclEventRecord(later, stream), cclSuccess);
  EXPECT_NE(cclEventSynchronize(later), cclSuccess);
  for (cclEvent_t e : {after, later}) EXPECT_EQ(cclEventDestroy(e), cclSuccess);
  EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
  EXPECT_EQ(cclStreamDestroy(other), cclSuccess);
  done.store(true);
  idle.join();
  EXPECT_EQ(cclCommAbort(comm), cclSuccess);
}

// Events and streams destroyed while work they mark is still queued: the work completes, an event
// outlives its stream, and nothing is cancelled or freed under it.
TEST(Event, DestroyWithPendingWork) {
  constexpr int kRanks = 2;
  std::atomic<bool> queued{false};
  with_ranks(kRanks, 20000, [&](int rank, cclComm_t comm) {
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamCreate(&stream), cclSuccess);
    cclEvent_t dropped = nullptr, kept = nullptr;
    ASSERT_EQ(cclEventCreate(&dropped), cclSuccess);
    ASSERT_EQ(cclEventCreate(&kept), cclSuccess);
    std::vector<int> x(1 << 16, rank + 1);
    if (rank == 1) await(queued);  // rank 0's work stays pending until rank 1 joins
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclInt32, cclSum, comm, stream),
                cclSuccess);
    }
    ASSERT_EQ(cclEventRecord(dropped, stream), cclSuccess);
    ASSERT_EQ(cclEventRecord(kept, stream), cclSuccess);
    if (rank == 0) {
      EXPECT_EQ(cclEventQuery(kept), cclInProgress);
      EXPECT_EQ(cclEventDestroy(dropped), cclSuccess);  // pending work is not cancelled
      queued.store(true);
    } else {
      EXPECT_EQ(cclEventDestroy(dropped), cclSuccess);
    }
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);  // waits for the work
    EXPECT_EQ(cclEventQuery(kept), cclSuccess);       // outlives its stream
    EXPECT_EQ(cclEventSynchronize(kept), cclSuccess);
    EXPECT_EQ(x[0], 3 * 2 * 2 * 2);  // (1 + 2), then doubled three times
    EXPECT_EQ(cclEventDestroy(kept), cclSuccess);
  });
}

TEST(Event, CppApi) {
  constexpr int kRanks = 2;
  with_ranks(kRanks, 20000, [&](int rank, cclComm_t comm) {
    ccl::Stream a, b;
    ccl::Event reduced;
    EXPECT_TRUE(reduced.query());
    std::vector<double> x(513, rank + 1.0), y(513, 0.0);
    ASSERT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclFloat64, cclSum, comm, a.get()),
              cclSuccess);
    reduced.record(a);
    b.wait(reduced);
    ASSERT_EQ(cclAllReduce(x.data(), y.data(), x.size(), cclFloat64, cclSum, comm, b.get()),
              cclSuccess);
    ccl::Event finished;
    finished.record(b);
    finished.synchronize();
    EXPECT_TRUE(reduced.query());
    EXPECT_EQ(y[512], 6.0);
    ccl::Event moved = std::move(finished);
    EXPECT_FALSE(static_cast<bool>(finished));
    EXPECT_TRUE(moved.query());
  });
}

}  // namespace
