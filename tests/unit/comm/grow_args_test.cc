// cclCommGrow's argument checks (ccl.h, "Recovering from a failed rank"): every mistake a member
// or a newcomer can make in its arguments is refused at once with cclInvalidArgument, a message
// that names the argument, and *newcomm set to NULL; nothing is joined, and the communicator
// still works (a correct grow right after the refused ones succeeds). Ranks are threads of this
// process (tests/unit/support/rank_threads.h); growing with real newcomers is in
// recovery_api_test (threads) and tests/integration/grow_check (processes under cclrun).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <thread>

#include "../support/rank_threads.h"
#include "ccl/ccl.h"
#include "ccl/ccl.hpp"

namespace {

using ccl_test::run_ranks;

// A non-NULL value a refused call must overwrite with NULL.
cclComm_t poisoned() { return reinterpret_cast<cclComm_t>(static_cast<uintptr_t>(0x1)); }

// The same unique id on every rank: rank 0 makes it and broadcasts it over comm.
cclUniqueId shared_id(cclComm_t comm, int rank) {
  cclUniqueId id{};
  if (rank == 0) {
    EXPECT_EQ(cclGetUniqueId(&id), cclSuccess);
  }
  EXPECT_EQ(cclBroadcast(id.internal, id.internal, sizeof(id.internal), cclUint8, 0, comm, nullptr),
            cclSuccess)
      << cclGetLastError(comm);
  return id;
}

// Runs call(&out) with out poisoned and checks that it was refused as it should be:
// cclInvalidArgument, out NULL, and `comm`'s last error (the thread's when comm is NULL) naming
// cclCommGrow and containing `words`.
template <class Call>
void expect_refused(cclComm_t comm, const std::string& words, Call call) {
  cclComm_t out = poisoned();
  const cclResult_t result = call(&out);
  EXPECT_EQ(result, cclInvalidArgument) << cclGetErrorString(result) << " (want: " << words << ")";
  EXPECT_EQ(out, nullptr) << words;
  const std::string message = cclGetLastError(comm);
  EXPECT_NE(message.find("cclCommGrow"), std::string::npos) << message;
  EXPECT_NE(message.find(words), std::string::npos) << "want '" << words << "' in: " << message;
}

TEST(GrowArgs, MemberMistakesAreRefused) {
  run_ranks(3, [](ccl::Communicator& comm) {
    cclComm_t c = comm.get();
    const cclUniqueId id = shared_id(c, comm.rank());
    // A member keeps its rank: any rank other than -1 is a mistake, its own included.
    for (int rank : {0, 1, 2, 3, -2}) {
      expect_refused(c, "rank " + std::to_string(rank) + ": a member of comm keeps its rank",
                     [&](cclComm_t* out) { return cclCommGrow(c, 4, &id, rank, out, nullptr); });
    }
    // Growing to fewer ranks than comm has (shrinking is cclCommShrink's job).
    for (int nranks : {2, 1, 0, -1}) {
      expect_refused(c, "nranks " + std::to_string(nranks) + " is smaller than comm's 3 ranks",
                     [&](cclComm_t* out) { return cclCommGrow(c, nranks, &id, -1, out, nullptr); });
    }
    expect_refused(c, "uniqueId is NULL",
                   [&](cclComm_t* out) { return cclCommGrow(c, 4, nullptr, -1, out, nullptr); });
    expect_refused(c, "newcomm is NULL", [&](cclComm_t* out) {
      *out = nullptr;  // nothing to write to
      return cclCommGrow(c, 4, &id, -1, nullptr, nullptr);
    });
    // A config not made with CCL_CONFIG_INITIALIZER, and one with a bad value.
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.magic = 0;
    expect_refused(c, "CCL_CONFIG_INITIALIZER",
                   [&](cclComm_t* out) { return cclCommGrow(c, 4, &id, -1, out, &config); });
    config = CCL_CONFIG_INITIALIZER;
    config.timeoutMs = -5;
    expect_refused(c, "timeoutMs -5",
                   [&](cclComm_t* out) { return cclCommGrow(c, 4, &id, -1, out, &config); });

    // Nothing was joined or broken: the communicator works, and a correct grow (to its own size:
    // no newcomers) at the id the refused calls named succeeds.
    std::array<float, 1> x{static_cast<float>(comm.rank() + 1)};
    comm.all_reduce(x);
    EXPECT_EQ(x[0], 1 + 2 + 3);
    cclComm_t grown = nullptr;
    ASSERT_EQ(cclCommGrow(c, 3, &id, -1, &grown, nullptr), cclSuccess) << cclGetLastError(c);
    int size = 0, rank = -1;
    cclCommCount(grown, &size);
    cclCommUserRank(grown, &rank);
    EXPECT_EQ(size, 3);
    EXPECT_EQ(rank, comm.rank());
    float y = static_cast<float>(rank + 1);
    EXPECT_EQ(cclAllReduce(&y, &y, 1, cclFloat, cclSum, grown, nullptr), cclSuccess);
    EXPECT_EQ(y, 1 + 2 + 3);
    EXPECT_EQ(cclCommDestroy(grown), cclSuccess);
  });
}

TEST(GrowArgs, NewcomerMistakesAreRefused) {
  // A newcomer has no communicator: its checks need no peer, and its errors are the thread's.
  cclUniqueId id{};
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  // Its rank must lie in [0, nranks) (the members hold [0, old size): see NewcomerTakingAMember
  // for what a rank among theirs does).
  for (int rank : {4, 5, -7}) {
    expect_refused(
        nullptr, "rank " + std::to_string(rank) + " is out of range [0, 4)",
        [&](cclComm_t* out) { return cclCommGrow(nullptr, 4, &id, rank, out, nullptr); });
  }
  // -1 is the members' value: the message says so.
  expect_refused(nullptr, "-1 is what a member of comm passes",
                 [&](cclComm_t* out) { return cclCommGrow(nullptr, 4, &id, -1, out, nullptr); });
  for (int nranks : {0, -3}) {
    expect_refused(
        nullptr, "nranks " + std::to_string(nranks) + " must be at least 1",
        [&](cclComm_t* out) { return cclCommGrow(nullptr, nranks, &id, 0, out, nullptr); });
  }
  expect_refused(nullptr, "uniqueId is NULL",
                 [&](cclComm_t* out) { return cclCommGrow(nullptr, 4, nullptr, 3, out, nullptr); });
  expect_refused(nullptr, "newcomm is NULL", [&](cclComm_t* out) {
    *out = nullptr;
    return cclCommGrow(nullptr, 4, &id, 3, nullptr, nullptr);
  });
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.blocking = 7;
  expect_refused(nullptr, "blocking 7",
                 [&](cclComm_t* out) { return cclCommGrow(nullptr, 4, &id, 3, out, &config); });
}

TEST(GrowArgs, NewcomerTakingAMembersRankFailsBounded) {
  // A newcomer that names a member's rank (0 here, of 2 members growing to 3) cannot be caught by
  // its own checks: nothing local tells it the old size. The join must still end, on every rank,
  // with an error and no communicator, within the timeout; nobody hangs. (Today each side times
  // out waiting for the rank nobody took, "store get 'peer/2' ... not set in time"; the
  // rendezvous could instead refuse the second rank 0 at once, naming it.)
  constexpr int kTimeoutMs = 2000;
  cclUniqueId grow_id{};
  std::thread newcomer;
  cclResult_t newcomer_result = cclSuccess;
  cclComm_t newcomer_comm = poisoned();
  run_ranks(2, [&](ccl::Communicator& comm) {
    cclComm_t c = comm.get();
    const cclUniqueId id = shared_id(c, comm.rank());
    cclConfig_t config = CCL_CONFIG_INITIALIZER;
    config.timeoutMs = kTimeoutMs;
    if (comm.rank() == 0) {
      grow_id = id;
      newcomer = std::thread([&] {
        cclConfig_t newcomer_config = CCL_CONFIG_INITIALIZER;
        newcomer_config.timeoutMs = kTimeoutMs;
        newcomer_result = cclCommGrow(nullptr, 3, &grow_id, 0, &newcomer_comm, &newcomer_config);
      });
    }
    cclComm_t grown = poisoned();
    EXPECT_NE(cclCommGrow(c, 3, &id, -1, &grown, &config), cclSuccess);
    EXPECT_EQ(grown, nullptr);
    // The member's own communicator is untouched.
    std::array<float, 1> x{1};
    comm.all_reduce(x);
    EXPECT_EQ(x[0], 2);
  });
  if (newcomer.joinable()) newcomer.join();
  EXPECT_NE(newcomer_result, cclSuccess);
  EXPECT_EQ(newcomer_comm, nullptr);
}

}  // namespace
