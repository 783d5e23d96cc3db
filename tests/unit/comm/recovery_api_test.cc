// Recovering from a failed rank (API.md), where every rank is alive: ranks as threads of this
// process over shared memory. The argument checks of the C functions; agree; shrink with a live
// excluded rank that does not call it; revoke reaching a rank blocked in a collective; shrink
// after revoke; grow back. Deaths (during agree, shrink and revoke) need processes: see
// tests/integration/recovery_api_check.cc.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/ccl.hpp"

namespace {

using ccl_test::run_ranks;

ccl::Config config_of(int timeout_s) {
  return ccl::Config{.timeout = std::chrono::seconds(timeout_s), .name = "recovery_api_test"};
}

// The sum over `ranks` of (rank + 1), as an allreduce of each rank's (rank + 1) gives.
float sum_of(const std::vector<int>& ranks) {
  float s = 0;
  for (int r : ranks) s += static_cast<float>(r + 1);
  return s;
}

TEST(RecoveryApi, RejectsBadArguments) {
  run_ranks(2, [](ccl::Communicator& comm) {
    cclComm_t c = comm.get();
    const int self = comm.rank(), other = 1 - self;
    EXPECT_EQ(cclCommRevoke(c, 1), cclInvalidArgument);
    EXPECT_EQ(cclCommRevoke(nullptr, 0), cclInvalidArgument);
    EXPECT_EQ(cclCommAgree(c, nullptr), cclInvalidArgument);
    int ranks[4], count = -1;
    EXPECT_EQ(cclCommGetFailedRanks(c, ranks, 4, nullptr), cclInvalidArgument);
    EXPECT_EQ(cclCommGetFailedRanks(c, ranks, -1, &count), cclInvalidArgument);
    EXPECT_EQ(cclCommGetFailedRanks(c, nullptr, 4, &count), cclInvalidArgument);
    EXPECT_EQ(cclCommGetFailedRanks(c, nullptr, 0, &count), cclSuccess);
    EXPECT_EQ(count, 0);
    cclComm_t out = reinterpret_cast<cclComm_t>(&count);  // must be set to NULL on failure
    EXPECT_EQ(cclCommShrink(c, nullptr, 0, &out, nullptr, 2), cclInvalidArgument);
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(cclCommShrink(c, nullptr, 1, &out, nullptr, 0), cclInvalidArgument);
    EXPECT_EQ(cclCommShrink(c, nullptr, -1, &out, nullptr, 0), cclInvalidArgument);
    int bad[] = {2};
    EXPECT_EQ(cclCommShrink(c, bad, 1, &out, nullptr, 0), cclInvalidArgument);
    int twice[] = {other, other};
    EXPECT_EQ(cclCommShrink(c, twice, 2, &out, nullptr, 0), cclInvalidArgument);
    int me[] = {self};
    EXPECT_EQ(cclCommShrink(c, me, 1, &out, nullptr, 0), cclInvalidArgument);
    EXPECT_NE(std::string(cclGetLastError(c)).find("excludeRanksList"), std::string::npos);
    EXPECT_EQ(cclCommShrink(c, nullptr, 0, nullptr, nullptr, 0), cclInvalidArgument);
    // The communicator is untouched by refused calls.
    std::array<float, 2> x{1, 2};
    comm.all_reduce(x);
    EXPECT_EQ(x[1], 4);
  });
}

TEST(RecoveryApi, AgreeIsTheAndOfEveryRanksFlag) {
  run_ranks(4, [](ccl::Communicator& comm) {
    // Bit r is clear on rank r only; bit 8 is set everywhere.
    const int flag = 0x1ff & ~(1 << comm.rank());
    EXPECT_EQ(comm.agree(flag), 0x1f0);
    EXPECT_EQ(comm.agree(comm.rank() == 2 ? 0 : 1), 0);
    EXPECT_EQ(comm.agree(-1), -1);
    EXPECT_TRUE(comm.failed_ranks().empty());
    // Agreements do not disturb the collectives.
    std::array<float, 1> x{static_cast<float>(comm.rank() + 1)};
    comm.all_reduce(x);
    EXPECT_EQ(x[0], sum_of({0, 1, 2, 3}));
  });
}

TEST(RecoveryApi, ShrinkLeavesOutALiveRankThatDoesNotCallIt) {
  run_ranks(4, [](ccl::Communicator& comm) {
    const int excluded = 1;
    if (comm.rank() == excluded) return;  // alive, and never calls shrink
    ccl::Communicator shrunk = comm.shrink({excluded}, false);
    // Survivors keep their order: new rank = old rank minus the excluded ranks below it.
    EXPECT_EQ(shrunk.size(), 3);
    EXPECT_EQ(shrunk.rank(), comm.rank() - (comm.rank() > excluded ? 1 : 0));
    std::array<float, 3> x;
    x.fill(static_cast<float>(comm.rank() + 1));
    shrunk.all_reduce(x);
    EXPECT_EQ(x[2], sum_of({0, 2, 3}));
    // A second shrink of the same parent (all three again, nothing more excluded).
    ccl::Communicator again = comm.shrink({excluded}, false);
    EXPECT_EQ(again.size(), 3);
  });
}

TEST(RecoveryApi, RevokeEndsAPeersBlockedCollectiveAndLaterOnes) {
  run_ranks(
      3,
      [](ccl::Communicator& comm) {
        std::array<float, 1024> x{};
        if (comm.rank() == 0) {
          // The others are (or soon will be) inside an allreduce that waits for this rank.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          comm.revoke();
        } else {
          const auto start = std::chrono::steady_clock::now();
          try {
            comm.all_reduce(x);
            ADD_FAILURE() << "the allreduce succeeded on a revoked communicator";
          } catch (const ccl::Error& e) {
            // RemoteError, not the 60 s timeout: the revoke reached this rank.
            EXPECT_EQ(e.code(), cclRemoteError) << e.what();
            EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
          }
        }
        try {
          comm.all_reduce(x);
          ADD_FAILURE() << "an operation after the revoke succeeded";
        } catch (const ccl::Error& e) {
          EXPECT_EQ(e.code(), cclRemoteError);
          EXPECT_NE(std::string(e.what()).find("revoked by rank 0"), std::string::npos) << e.what();
        }
        // A revoked communicator still agrees and shrinks: here to all of its ranks.
        EXPECT_EQ(comm.agree(1), 1);
        ccl::Communicator fresh = comm.shrink({}, true);
        EXPECT_EQ(fresh.size(), 3);
        std::array<float, 1> y{static_cast<float>(comm.rank() + 1)};
        fresh.all_reduce(y);
        EXPECT_EQ(y[0], sum_of({0, 1, 2}));
      },
      config_of(60));
}

TEST(RecoveryApi, GrowsBackWithANewcomer) {
  // Rank 2 leaves through a shrink and comes back as the grown communicator's newcomer.
  ccl::UniqueId grow_id{};
  std::atomic<bool> id_ready{false};
  run_ranks(3, [&](ccl::Communicator& comm) {
    const int leaving = 2;
    if (comm.rank() == leaving) {
      for (int i = 0; i < 3000 && !id_ready.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      ASSERT_TRUE(id_ready.load());
      ccl::Communicator grown = ccl::Communicator::join_grown(3, grow_id, 2);
      std::array<float, 1> x{10};
      grown.all_reduce(x);
      EXPECT_EQ(x[0], 10 + 1 + 2);
      return;
    }
    ccl::Communicator shrunk = comm.shrink({leaving}, false);
    if (shrunk.rank() == 0) {
      grow_id = ccl::get_unique_id();
      id_ready.store(true);
    }
    for (int i = 0; i < 3000 && !id_ready.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ccl::Communicator grown = shrunk.grow(3, grow_id);
    EXPECT_EQ(grown.size(), 3);
    EXPECT_EQ(grown.rank(), shrunk.rank());  // members keep their ranks
    std::array<float, 1> x{static_cast<float>(grown.rank() + 1)};
    grown.all_reduce(x);
    EXPECT_EQ(x[0], 10 + 1 + 2);
    // Bad calls of grow: a member with a rank, fewer ranks than the communicator has.
    cclComm_t out = nullptr;
    EXPECT_EQ(cclCommGrow(shrunk.get(), 3, &grow_id, 1, &out, nullptr), cclInvalidArgument);
    EXPECT_EQ(cclCommGrow(shrunk.get(), 1, &grow_id, -1, &out, nullptr), cclInvalidArgument);
    EXPECT_EQ(cclCommGrow(shrunk.get(), 3, nullptr, -1, &out, nullptr), cclInvalidArgument);
    EXPECT_EQ(out, nullptr);
  });
}

}  // namespace
