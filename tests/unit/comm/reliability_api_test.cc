// Reliability through the C API, ranks as threads of this process (over shm): non-blocking init
// and operations, abort from another thread and during init, failure notices reaching idle peers,
// CCL_CHECK_MODE and the flight recorder's dump. Every wait here is bounded.
#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccl/ccl.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

cclConfig_t config_with(int blocking, int timeout_ms) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.blocking = blocking;
  config.timeoutMs = timeout_ms;
  return config;
}

// Runs body(rank, id) on `nranks` threads sharing one unique id; joins them all.
void run_ranks(int nranks, const std::function<void(int, cclUniqueId)>& body) {
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back([&, r] { body(r, id); });
  for (auto& t : threads) t.join();
}

// Polls cclCommGetAsyncError until it is not cclInProgress, for at most `limit`.
cclResult_t wait_async(cclComm_t comm, milliseconds limit = milliseconds(20000)) {
  const auto until = Clock::now() + limit;
  cclResult_t state = cclInProgress;
  while (Clock::now() < until) {
    if (cclCommGetAsyncError(comm, &state) != cclSuccess) return cclInternalError;
    if (state != cclInProgress) return state;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return state;
}

TEST(NonBlocking, InitAndOperationsReturnInProgressAndComplete) {
  constexpr int kRanks = 3;
  run_ranks(kRanks, [](int rank, cclUniqueId id) {
    cclConfig_t config = config_with(0, 20000);
    cclComm_t comm = nullptr;
    EXPECT_EQ(cclCommInitRankConfig(&comm, kRanks, id, rank, &config), cclInProgress);
    ASSERT_NE(comm, nullptr);
    // Issued before init is done: queued behind it.
    std::vector<float> x(1000, static_cast<float>(rank + 1));
    EXPECT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, nullptr),
              cclInProgress);
    EXPECT_EQ(wait_async(comm), cclSuccess) << cclGetLastError(comm);
    EXPECT_EQ(x[0], 6.0f);
    EXPECT_EQ(x[999], 6.0f);
    // A grouped send/recv ring, also in the background.
    int out = rank, in = -1;
    EXPECT_EQ(cclGroupStart(), cclSuccess);
    cclSend(&out, 1, cclInt32, (rank + 1) % kRanks, comm, nullptr);
    cclRecv(&in, 1, cclInt32, (rank + kRanks - 1) % kRanks, comm, nullptr);
    EXPECT_EQ(cclGroupEnd(), cclInProgress);
    EXPECT_EQ(wait_async(comm), cclSuccess) << cclGetLastError(comm);
    EXPECT_EQ(in, (rank + kRanks - 1) % kRanks);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

TEST(NonBlocking, AbortDuringInitReturnsWithinASecond) {
  // Rank 1 never joins: rank 0's init waits in the background until it is aborted.
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  cclConfig_t config = config_with(0, 60000);
  cclComm_t comm = nullptr;
  ASSERT_EQ(cclCommInitRankConfig(&comm, 2, id, 0, &config), cclInProgress);
  std::this_thread::sleep_for(milliseconds(200));
  cclResult_t state = cclSuccess;
  EXPECT_EQ(cclCommGetAsyncError(comm, &state), cclSuccess);
  EXPECT_EQ(state, cclInProgress);
  const auto start = Clock::now();
  EXPECT_EQ(cclCommAbort(comm), cclSuccess);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
}

// A non-blocking config makes cclCommSplit return cclInProgress; the new communicator joins in
// the background. From a blocking parent, and from a non-blocking one whose queued allreduce must
// run before the split's own exchange; a CCL_SPLIT_NOCOLOR rank gets no communicator.
TEST(NonBlocking, SplitJoinsInTheBackground) {
  constexpr int kRanks = 4;
  for (int parent_blocking : {1, 0}) {
    SCOPED_TRACE(parent_blocking ? "blocking parent" : "non-blocking parent");
    run_ranks(kRanks, [&](int rank, cclUniqueId id) {
      cclConfig_t parent_config = config_with(parent_blocking, 20000);
      cclComm_t parent = nullptr;
      const cclResult_t init = cclCommInitRankConfig(&parent, kRanks, id, rank, &parent_config);
      ASSERT_EQ(init, parent_blocking ? cclSuccess : cclInProgress);
      std::vector<int> queued(100, rank);
      cclResult_t r = cclAllReduce(queued.data(), queued.data(), queued.size(), cclInt32, cclSum,
                                   parent, nullptr);
      EXPECT_EQ(r, parent_blocking ? cclSuccess : cclInProgress);
      // Ranks 0 and 2 form one group (rank 2 first, by key), rank 1 joins none, rank 3 is alone.
      const int color = rank == 1 ? CCL_SPLIT_NOCOLOR : rank % 2;
      cclConfig_t child_config = config_with(0, 20000);
      cclComm_t child = nullptr;
      r = cclCommSplit(parent, color, kRanks - rank, &child, &child_config);
      EXPECT_EQ(queued[99], 0 + 1 + 2 + 3) << "the queued allreduce ran first";
      if (rank == 1) {
        EXPECT_EQ(r, cclSuccess);
        EXPECT_EQ(child, nullptr);
      } else {
        EXPECT_EQ(r, cclInProgress) << cclGetLastError(nullptr);
        ASSERT_NE(child, nullptr);
        EXPECT_EQ(wait_async(child), cclSuccess) << cclGetLastError(child);
        int size = 0, child_rank = -1;
        EXPECT_EQ(cclCommCount(child, &size), cclSuccess);
        EXPECT_EQ(cclCommUserRank(child, &child_rank), cclSuccess);
        EXPECT_EQ(size, rank == 3 ? 1 : 2);
        EXPECT_EQ(child_rank, rank == 0 ? 1 : 0);
        std::vector<float> x(1000, static_cast<float>(rank));
        EXPECT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, child, nullptr),
                  cclInProgress);
        EXPECT_EQ(wait_async(child), cclSuccess) << cclGetLastError(child);
        EXPECT_EQ(x[999], rank == 3 ? 3.0f : 2.0f);
        EXPECT_EQ(cclCommDestroy(child), cclSuccess);
      }
      if (!parent_blocking) {
        EXPECT_EQ(wait_async(parent), cclSuccess) << cclGetLastError(parent);
      }
      EXPECT_EQ(cclCommDestroy(parent), cclSuccess);
    });
  }
}

// Rank 1 aborts its new communicator at once, before the group can form, so rank 0's join
// cannot complete: it does not succeed, and aborting it returns within a second on both ranks.
TEST(NonBlocking, AbortOfASplitThatCannotJoin) {
  run_ranks(2, [](int rank, cclUniqueId id) {
    cclConfig_t config = config_with(1, 60000);
    cclComm_t parent = nullptr;
    ASSERT_EQ(cclCommInitRankConfig(&parent, 2, id, rank, &config), cclSuccess);
    cclConfig_t child_config = config_with(0, 10000);
    cclComm_t child = nullptr;
    const cclResult_t r = cclCommSplit(parent, 0, 1 - rank, &child, &child_config);
    EXPECT_EQ(r, cclInProgress);
    ASSERT_NE(child, nullptr);
    if (rank == 1) {
      const auto start = Clock::now();
      EXPECT_EQ(cclCommAbort(child), cclSuccess);
      EXPECT_LT(Clock::now() - start, milliseconds(1000));
    } else {
      std::this_thread::sleep_for(milliseconds(300));
      cclResult_t state = cclSuccess;
      EXPECT_EQ(cclCommGetAsyncError(child, &state), cclSuccess);
      EXPECT_NE(state, cclSuccess) << "the group cannot form without rank 1";
      const auto start = Clock::now();
      EXPECT_EQ(cclCommAbort(child), cclSuccess);
      EXPECT_LT(Clock::now() - start, milliseconds(1000));
    }
    EXPECT_EQ(cclCommDestroy(parent), cclSuccess);
  });
}

TEST(Abort, FromAnotherThreadReleasesABlockedCallerAndTellsThePeer) {
  std::atomic<bool> rank0_done{false};
  run_ranks(2, [&](int rank, cclUniqueId id) {
    cclConfig_t config = config_with(1, 30000);
    cclComm_t comm = nullptr;
    ASSERT_EQ(cclCommInitRankConfig(&comm, 2, id, rank, &config), cclSuccess);
    std::vector<float> x(1 << 16, 1.0f);
    if (rank == 0) {
      // Blocked: rank 1 does not take part. Another thread aborts after a while.
      std::thread aborter([&] {
        std::this_thread::sleep_for(milliseconds(300));
        const auto start = Clock::now();
        EXPECT_EQ(cclCommAbort(comm), cclSuccess);
        EXPECT_LT(Clock::now() - start, milliseconds(1000));
      });
      const auto start = Clock::now();
      const cclResult_t r =
          cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, nullptr);
      EXPECT_NE(r, cclSuccess);
      EXPECT_LT(Clock::now() - start, milliseconds(1300));
      aborter.join();
      rank0_done = true;
    } else {
      // Idle until rank 0 aborted; then its operations fail fast, naming the abort. (The first
      // may still complete: what rank 0 published before it aborted is good.)
      while (!rank0_done) std::this_thread::sleep_for(milliseconds(5));
      const auto start = Clock::now();
      cclResult_t r = cclSuccess;
      for (int i = 0; i < 3 && r == cclSuccess; ++i) {
        r = cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, nullptr);
      }
      EXPECT_EQ(r, cclRemoteError);
      EXPECT_LT(Clock::now() - start, milliseconds(2000));
      EXPECT_NE(std::string(cclGetLastError(comm)).find("rank 0 aborted"), std::string::npos)
          << cclGetLastError(comm);
      cclResult_t async = cclSuccess;
      EXPECT_EQ(cclCommGetAsyncError(comm, &async), cclSuccess);
      EXPECT_EQ(async, cclRemoteError);
      EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
    }
  });
}

TEST(Abort, AnIdlePeerSeesItInGetAsyncError) {
  std::atomic<bool> aborted{false};
  run_ranks(2, [&](int rank, cclUniqueId id) {
    cclConfig_t config = config_with(1, 30000);
    cclComm_t comm = nullptr;
    ASSERT_EQ(cclCommInitRankConfig(&comm, 2, id, rank, &config), cclSuccess);
    if (rank == 1) {
      EXPECT_EQ(cclCommAbort(comm), cclSuccess);
      aborted = true;
      return;
    }
    while (!aborted) std::this_thread::sleep_for(milliseconds(5));
    cclResult_t async = cclSuccess;
    EXPECT_EQ(cclCommGetAsyncError(comm, &async), cclSuccess);
    EXPECT_EQ(async, cclRemoteError);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

TEST(Timeout, NamesTheAwaitedRankAndTheOperation) {
  std::atomic<bool> rank0_done{false};
  run_ranks(2, [&](int rank, cclUniqueId id) {
    cclConfig_t config = config_with(1, 2000);
    cclComm_t comm = nullptr;
    ASSERT_EQ(cclCommInitRankConfig(&comm, 2, id, rank, &config), cclSuccess);
    std::vector<float> x(64, 1.0f);
    EXPECT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, nullptr),
              cclSuccess);  // both take part in the first
    if (rank == 1) {
      while (!rank0_done) std::this_thread::sleep_for(milliseconds(5));
      cclCommDestroy(comm);
      return;
    }
    const cclResult_t r =
        cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, nullptr);
    EXPECT_EQ(r, cclTimeout);
    const std::string message = cclGetLastError(comm);
    EXPECT_NE(message.find("waiting for rank 1"), std::string::npos) << message;
    EXPECT_NE(message.find("allreduce #"), std::string::npos) << message;
    rank0_done = true;
    cclCommAbort(comm);
  });
}

// Open descriptors and threads of this process.
std::pair<size_t, size_t> fds_and_threads() {
  auto count = [](const char* dir) {
    size_t n = 0;
    if (DIR* d = opendir(dir)) {
      while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  };
  return {count("/proc/self/fd"), count("/proc/self/task")};
}

// Nothing survives destroy or abort: no descriptor, no thread (the rendezvous server's thread
// ends once every rank has left it, so the count is awaited, bounded).
TEST(Leaks, DestroyAndAbortLeaveNoDescriptorOrThread) {
  auto cycle = [](bool abort, int blocking) {
    std::atomic<int> finished{0};
    run_ranks(3, [&](int rank, cclUniqueId id) {
      cclConfig_t config = config_with(blocking, 20000);
      cclComm_t comm = nullptr;
      cclResult_t r = cclCommInitRankConfig(&comm, 3, id, rank, &config);
      ASSERT_TRUE(r == cclSuccess || r == cclInProgress);
      if (blocking == 0) {
        ASSERT_EQ(wait_async(comm), cclSuccess);
      }
      std::vector<double> x(5000, 1.0);
      r = cclAllReduce(x.data(), x.data(), x.size(), cclFloat64, cclSum, comm, nullptr);
      if (blocking == 0) r = r == cclInProgress ? wait_async(comm) : r;
      EXPECT_EQ(r, cclSuccess);
      // An abort fails a peer's operation that still needs this rank: abort once all are done.
      ++finished;
      while (finished < 3) std::this_thread::sleep_for(milliseconds(1));
      EXPECT_EQ(abort ? cclCommAbort(comm) : cclCommDestroy(comm), cclSuccess);
    });
  };
  cycle(false, 1);  // process-wide threads (the SIGUSR1 dumper) start once, here
  const auto before = fds_and_threads();
  cycle(false, 1);
  cycle(true, 1);
  cycle(false, 0);
  cycle(true, 0);
  auto after = fds_and_threads();
  for (int i = 0; i < 200 && after != before; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    after = fds_and_threads();
  }
  EXPECT_EQ(after.first, before.first) << "descriptors";
  EXPECT_EQ(after.second, before.second) << "threads";
}

// CCL_CHECK_MODE is read when a communicator is made: set before the ranks start.
class CheckMode : public testing::Test {
 protected:
  void SetUp() override { setenv("CCL_CHECK_MODE", "1", 1); }
  void TearDown() override { unsetenv("CCL_CHECK_MODE"); }
};

TEST_F(CheckMode, AgreeingCallsRunAndADisagreementFailsEveryRank) {
  constexpr int kRanks = 3;
  std::vector<std::string> messages(kRanks);
  std::vector<cclResult_t> results(kRanks, cclSuccess);
  run_ranks(kRanks, [&](int rank, cclUniqueId id) {
    cclConfig_t config = config_with(1, 20000);
    cclComm_t comm = nullptr;
    ASSERT_EQ(cclCommInitRankConfig(&comm, kRanks, id, rank, &config), cclSuccess);
    std::vector<float> x(100, 1.0f);
    EXPECT_EQ(cclAllReduce(x.data(), x.data(), 100, cclFloat32, cclSum, comm, nullptr), cclSuccess);
    EXPECT_EQ(x[0], 3.0f);
    EXPECT_EQ(cclBroadcast(x.data(), x.data(), 100, cclFloat32, 1, comm, nullptr), cclSuccess);
    // Rank 2 passes another count: every rank must fail, none may hang or reduce.
    const size_t count = rank == 2 ? 99 : 100;
    results[rank] = cclAllReduce(x.data(), x.data(), count, cclFloat32, cclSum, comm, nullptr);
    messages[rank] = cclGetLastError(comm);
    EXPECT_EQ(x[0], 3.0f);  // untouched
    cclCommDestroy(comm);
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(results[r], cclInvalidUsage) << "rank " << r;
    EXPECT_NE(messages[r].find("rank 2 called #3 allreduce count 99"), std::string::npos)
        << messages[r];
    EXPECT_NE(messages[r].find("differs from rank 0 in count"), std::string::npos) << messages[r];
  }
}

TEST_F(CheckMode, AnotherCollectiveAndRootAreNamed) {
  constexpr int kRanks = 2;
  std::vector<std::string> messages(kRanks);
  run_ranks(kRanks, [&](int rank, cclUniqueId id) {
    cclConfig_t config = config_with(1, 20000);
    cclComm_t comm = nullptr;
    ASSERT_EQ(cclCommInitRankConfig(&comm, kRanks, id, rank, &config), cclSuccess);
    std::vector<float> x(8, 1.0f);
    const cclResult_t r =
        rank == 0 ? cclBroadcast(x.data(), x.data(), 8, cclFloat32, 0, comm, nullptr)
                  : cclReduce(x.data(), x.data(), 8, cclFloat32, cclMax, 1, comm, nullptr);
    EXPECT_EQ(r, cclInvalidUsage);
    messages[rank] = cclGetLastError(comm);
    cclCommDestroy(comm);
  });
  for (const std::string& m : messages) {
    EXPECT_NE(m.find("differs from rank 0 in collective, op, root"), std::string::npos) << m;
  }
}

}  // namespace
