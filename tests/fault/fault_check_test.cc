// The parts of fault_check that decide pass or fail, checked without killing anything: the
// verdict rules, the parsing of rank lists in messages, and the mixed loop's result checks
// (which must reject poisoned outputs and accept real ones, on a one-rank communicator).
#include <gtest/gtest.h>

#include "fault_ops.h"
#include "fault_verdict.h"

namespace ccl::fault {
namespace {

TEST(FaultNamesRank, FindsTheRankInTheLibrarysPhrasings) {
  EXPECT_TRUE(names_rank("allgather #4: timed out waiting for rank(s) 0,2", 2));
  EXPECT_TRUE(names_rank("allgather #4: timed out waiting for rank(s) 0,2", 0));
  EXPECT_FALSE(names_rank("allgather #4: timed out waiting for rank(s) 0,2", 1));
  EXPECT_TRUE(names_rank("allreduce #9: rank 1 timed out waiting for rank 3", 3));
  EXPECT_TRUE(names_rank("no connection from ranks [1, 2]", 1));
  EXPECT_FALSE(names_rank("timed out waiting for rank 12", 1));
  EXPECT_FALSE(names_rank("timed out waiting for rank 12", 2));
  EXPECT_FALSE(names_rank("allgather #2: timed out", 2));  // the sequence number is not a rank
  EXPECT_FALSE(names_rank("", 0));
}

Failure good_kill_failure() {
  Failure f;
  f.rank = 0;
  f.op = "allreduce";
  f.result = cclRemoteError;
  f.stamped = true;
  f.stamp_ms = 1000;
  f.fail_ms = 1100;
  f.async_error = cclRemoteError;
  return f;
}

TEST(FaultVerdict, AcceptsAPromptRemoteErrorAfterTheKill) {
  EXPECT_TRUE(judge_survivor(Mode::kKill, 1, Limits{}, good_kill_failure()));
}

TEST(FaultVerdict, RejectsEachBrokenRule) {
  Failure late = good_kill_failure();
  late.fail_ms = late.stamp_ms + 2001;
  EXPECT_FALSE(judge_survivor(Mode::kKill, 1, Limits{}, late));

  Failure wrong_code = good_kill_failure();
  wrong_code.result = cclInternalError;
  EXPECT_FALSE(judge_survivor(Mode::kKill, 1, Limits{}, wrong_code));

  Failure before = good_kill_failure();
  before.stamped = false;
  EXPECT_FALSE(judge_survivor(Mode::kKill, 1, Limits{}, before));

  Failure silent = good_kill_failure();
  silent.async_error = cclSuccess;
  EXPECT_FALSE(judge_survivor(Mode::kKill, 1, Limits{}, silent));

  Failure slow_abort = good_kill_failure();
  slow_abort.abort_ms = 1500;
  EXPECT_FALSE(judge_survivor(Mode::kKillStream, 1, Limits{}, slow_abort));
}

TEST(FaultVerdict, IdleLatencyCountsFromTheCallNotFromTheKill) {
  Failure f = good_kill_failure();
  f.stamp_ms = 1000;
  f.call_start_ms = 1600;  // the survivor slept through the kill
  f.fail_ms = 3000;        // 2000 ms after the kill, 1400 ms into the call
  EXPECT_EQ(fault_latency_ms(Mode::kKillIdle, f), 1400);
  EXPECT_TRUE(judge_survivor(Mode::kKillIdle, 1, Limits{}, f));
  f.fail_ms = 3700;
  EXPECT_FALSE(judge_survivor(Mode::kKillIdle, 1, Limits{}, f));
}

TEST(FaultVerdict, StopNeedsATimeoutNamingTheStoppedRank) {
  Limits limits;
  limits.timeout_ms = 3000;
  Failure f = good_kill_failure();
  f.result = cclTimeout;
  f.async_error = cclTimeout;
  f.fail_ms = f.stamp_ms + 3000;
  f.message = "barrier #3: timed out waiting for rank(s) 2";
  EXPECT_TRUE(judge_survivor(Mode::kStop, 2, limits, f));
  EXPECT_FALSE(judge_survivor(Mode::kStop, 1, limits, f));  // names 2, not 1
  Failure remote = f;
  remote.result = cclRemoteError;
  EXPECT_FALSE(judge_survivor(Mode::kStop, 2, limits, remote));
  Failure late = f;
  late.fail_ms = f.stamp_ms + 5001;
  EXPECT_FALSE(judge_survivor(Mode::kStop, 2, limits, late));
}

TEST(FaultOps, VerifyRejectsPoisonAndAcceptsRealResults) {
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  cclComm_t comm = nullptr;
  ASSERT_EQ(cclCommInitRank(&comm, 1, id, 0), cclSuccess) << cclGetLastError(nullptr);
  auto ops = make_mixed_ops(0, 1);
  ASSERT_EQ(ops.size(), 10u);
  for (uint64_t iter = 0; iter < 4; ++iter) {  // every count of the size-cycling operations
    for (auto& op : ops) {
      op->prepare(iter);
      if (std::string(op->name()) != "barrier") {
        EXPECT_NE(op->verify(), "") << op->name() << " accepted its poisoned output";
      }
      ASSERT_EQ(op->issue(comm, nullptr), cclSuccess)
          << op->name() << ": " << cclGetLastError(comm);
      EXPECT_EQ(op->verify(), "") << op->name() << " iter " << iter;
    }
  }
  EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
}

}  // namespace
}  // namespace ccl::fault
