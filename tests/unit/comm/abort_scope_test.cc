// Whom a rank's leaving fails, over shm and over tcp (ranks as threads of this process): an abort
// of a healthy idle communicator, or a destroy, fails only a peer's wait that needs the leaving
// rank, at once; a peer finishing an operation with the others completes it (API.md: "cclCommAbort
// on a healthy communicator succeeds"). A CI run under ThreadSanitizer caught the old behaviour: a
// 4-rank barrier failed on rank 1 because rank 0 had left the barrier and aborted. Every wait here
// is bounded.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kRanks = 4;
constexpr int kTimeoutMs = 30000;  // far above what any wait here may take

// The parameter: "shm", or "tcp" (shared memory disabled before the communicators are made).
class LeavingRank : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "tcp") setenv("CCL_SHM_DISABLE", "1", 1);
  }
  void TearDown() override { unsetenv("CCL_SHM_DISABLE"); }

  // Runs body(rank, comm) on kRanks threads, each with an initialised blocking communicator.
  static void run_ranks(const std::function<void(int, cclComm_t)>& body) {
    cclUniqueId id;
    ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        cclConfig_t config = CCL_CONFIG_INITIALIZER;
        config.timeoutMs = kTimeoutMs;
        cclComm_t comm = nullptr;
        if (cclCommInitRankConfig(&comm, kRanks, id, r, &config) != cclSuccess) {
          ADD_FAILURE() << "rank " << r << ": init failed";
          return;
        }
        body(r, comm);
      });
    }
    for (auto& t : threads) t.join();
  }
};

void wait_for(const std::atomic<bool>& flag) {
  const auto until = Clock::now() + milliseconds(20000);
  while (!flag && Clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(flag.load()) << "a peer did not get there in 20 s";
}

TEST_P(LeavingRank, AnIdleAbortFailsOnlyTheWaitsThatNeedIt) {
  std::atomic<bool> aborted{false}, rank1_done{false};
  run_ranks([&](int rank, cclComm_t comm) {
    std::vector<int32_t> x(1000, rank);
    if (rank == 0) {
      EXPECT_EQ(cclCommAbort(comm), cclSuccess);
      aborted = true;
      return;
    }
    if (rank == 3) {
      // Sends to rank 1 only once rank 0 has aborted, while rank 1 waits in its receive.
      wait_for(aborted);
      std::this_thread::sleep_for(milliseconds(100));
      EXPECT_EQ(cclSend(x.data(), x.size(), cclInt32, 1, comm, nullptr), cclSuccess);
    }
    if (rank == 1) {
      std::vector<int32_t> got(x.size(), -1);
      EXPECT_EQ(cclRecv(got.data(), got.size(), cclInt32, 3, comm, nullptr), cclSuccess)
          << cclGetLastError(comm);
      EXPECT_EQ(got, std::vector<int32_t>(x.size(), 3));
      // A receive from the aborted rank fails at once, naming the abort.
      const auto start = Clock::now();
      EXPECT_EQ(cclRecv(got.data(), got.size(), cclInt32, 0, comm, nullptr), cclRemoteError);
      EXPECT_LT(Clock::now() - start, milliseconds(5000));
      EXPECT_NE(std::string(cclGetLastError(comm)).find("rank 0 aborted"), std::string::npos)
          << cclGetLastError(comm);
      rank1_done = true;
    }
    if (rank == 2) {
      // Idle: it learns of the abort when it asks.
      wait_for(aborted);
      cclResult_t async = cclSuccess;
      for (int i = 0; i < 2000 && async == cclSuccess; ++i) {
        EXPECT_EQ(cclCommGetAsyncError(comm, &async), cclSuccess);
        if (async == cclSuccess) std::this_thread::sleep_for(milliseconds(1));
      }
      EXPECT_EQ(async, cclRemoteError);
    }
    if (rank == 3) wait_for(rank1_done);  // rank 1's last receive must not see rank 3 leave
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

// A rank whose operation fails because a peer aborted tells the others "aborted" too: rank 1's
// receive from the aborted rank 0 fails, and rank 2, waiting meanwhile for rank 3, completes.
TEST_P(LeavingRank, AFailureCausedByAnAbortIsRelayedAsAnAbort) {
  std::atomic<bool> aborted{false}, rank1_failed{false}, rank2_done{false};
  run_ranks([&](int rank, cclComm_t comm) {
    std::vector<int32_t> x(1000, rank);
    if (rank == 0) {
      EXPECT_EQ(cclCommAbort(comm), cclSuccess);
      aborted = true;
      return;
    }
    if (rank == 1) {
      wait_for(aborted);
      EXPECT_EQ(cclRecv(x.data(), x.size(), cclInt32, 0, comm, nullptr), cclRemoteError);
      rank1_failed = true;
    }
    if (rank == 3) {
      // Sends to rank 2 only once rank 1 has failed (and told everyone), while rank 2 waits.
      wait_for(rank1_failed);
      std::this_thread::sleep_for(milliseconds(100));
      EXPECT_EQ(cclSend(x.data(), x.size(), cclInt32, 2, comm, nullptr), cclSuccess);
      wait_for(rank2_done);
    }
    if (rank == 2) {
      std::vector<int32_t> got(x.size(), -1);
      EXPECT_EQ(cclRecv(got.data(), got.size(), cclInt32, 3, comm, nullptr), cclSuccess)
          << cclGetLastError(comm);
      EXPECT_EQ(got, std::vector<int32_t>(x.size(), 3));
      rank2_done = true;
    }
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

TEST_P(LeavingRank, AWaitForADestroyedRankFailsAtOnce) {
  std::atomic<bool> others_done{false};
  std::atomic<int> finished{0};
  run_ranks([&](int rank, cclComm_t comm) {
    std::vector<float> x(4096, 1.0f);
    EXPECT_EQ(cclAllReduce(x.data(), x.data(), x.size(), cclFloat32, cclSum, comm, nullptr),
              cclSuccess);
    if (rank == 0) {
      EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
      return;
    }
    if (rank == 1) {
      // Rank 0 has left (or is leaving): the receive fails long before the timeout.
      const auto start = Clock::now();
      EXPECT_EQ(cclRecv(x.data(), x.size(), cclFloat32, 0, comm, nullptr), cclRemoteError);
      EXPECT_LT(Clock::now() - start, milliseconds(5000));
      const std::string why = cclGetLastError(comm);
      EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
      EXPECT_TRUE(why.find("left the communicator") != std::string::npos ||
                  why.find("destroyed its communicator") != std::string::npos)
          << why;
    }
    if (++finished == kRanks - 1) others_done = true;
    wait_for(others_done);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, LeavingRank, testing::Values("shm", "tcp"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
