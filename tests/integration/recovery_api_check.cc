// Recovery's promises when ranks die during the recovery calls themselves (API.md "Recovering
// from a failed rank"), with real processes under cclrun (--grace keeps the survivors running).
// Each mode ends with the survivors on a shrunk communicator, verifying an allreduce over it; its
// rank 0 prints "recovery_api_check MODE: N survivors ok" (the ctest's pass pattern), and a rank
// that sees a broken promise prints "FAIL ..." and exits 1.
//
//   agree-coordinator  rank 0 (the agreement's coordinator) dies inside cclCommAgree; the others
//                      must agree on the AND of their flags and on the failed set {0}
//   agree-participant  rank 2 dies while the others are inside cclCommAgree
//   shrink             rank 3 dies; the survivors shrink excluding {3}, and rank 1 dies inside that
//                      shrink: ranks 0 and 2 get cclRemoteError (or, had rank 1 died after the
//                      join, a failed next call), then shrink again without it
//   fork               rank 3 forks a child that outlives it, then dies: the child must not keep
//                      rank 3's recovery listener and connections open (the agreement would
//                      wait for its timeout)
//   revoke             rank 2 dies; rank 0 revokes at once (promptly, though a peer is dead);
//                      ranks 1 and 3, blocked in an allreduce, get cclRemoteError; all shrink
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

int rank = -1;
const char* mode = "";

[[noreturn]] void fail(const char* what, cclComm_t comm) {
  printf("FAIL recovery_api_check %s rank %d: %s (%s)\n", mode, rank, what,
         comm != nullptr ? cclGetLastError(comm) : "");
  fflush(stdout);
  _exit(1);
}

void die_in(int ms) {
  std::thread([ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    raise(SIGKILL);
  }).detach();
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::vector<int> failed_ranks(cclComm_t comm) {
  int ranks[64], count = 0;
  if (cclCommGetFailedRanks(comm, ranks, 64, &count) != cclSuccess) fail("GetFailedRanks", comm);
  return std::vector<int>(ranks, ranks + count);
}

// Shrinks with CCL_SHRINK_ABORT until it holds (at most 3 tries), then checks the survivors with
// an allreduce of their world ranks + 1 against `want`.
void finish(cclComm_t comm, int survivors, long want) {
  cclComm_t next = nullptr;
  cclResult_t r = cclRemoteError;
  for (int i = 0; i < 3 && r == cclRemoteError; ++i) {
    r = cclCommShrink(comm, nullptr, 0, &next, nullptr, CCL_SHRINK_ABORT);
  }
  if (r != cclSuccess) fail("the last shrink", comm);
  cclCommDestroy(comm);
  int size = 0, new_rank = -1;
  cclCommCount(next, &size);
  cclCommUserRank(next, &new_rank);
  if (size != survivors) fail("the shrunk communicator's size", next);
  long mine = rank + 1, sum = 0;
  if (cclAllReduce(&mine, &sum, 1, cclInt64, cclSum, next, nullptr) != cclSuccess) {
    fail("the allreduce on the shrunk communicator", next);
  }
  if (sum != want) fail(("sum " + std::to_string(sum)).c_str(), next);
  if (new_rank == 0) printf("recovery_api_check %s: %d survivors ok\n", mode, survivors);
  fflush(stdout);
  cclCommDestroy(next);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr,
            "usage: recovery_api_check agree-coordinator|agree-participant|fork|shrink|revoke\n");
    return 2;
  }
  mode = argv[1];
  cclComm_t comm = nullptr;
  if (cclCommInitFromEnv(&comm) != cclSuccess) fail("init", nullptr);
  cclCommUserRank(comm, &rank);
  int n = 0;
  cclCommCount(comm, &n);
  if (n != 4) fail("run me with 4 ranks", comm);
  long x = 1;
  if (cclAllReduce(&x, &x, 1, cclInt64, cclSum, comm, nullptr) != cclSuccess) fail("warm-up", comm);

  if (strcmp(mode, "agree-coordinator") == 0 || strcmp(mode, "agree-participant") == 0) {
    const bool coordinator = mode[6] == 'c';
    const int victim = coordinator ? 0 : 2;
    if (rank == victim) {
      if (!coordinator) {
        sleep_ms(30);  // the others are inside the agreement by now
        raise(SIGKILL);
      }
      die_in(20);  // the others join 40 ms late: it dies while it waits for their votes
    } else if (coordinator) {
      sleep_ms(40);
    }
    // Bit r clear on rank r: the AND over the survivors clears exactly their bits.
    int flag = 0xff & ~(1 << rank);
    if (cclCommAgree(comm, &flag) != cclSuccess) fail("agree", comm);
    int want = 0xff;
    for (int r = 0; r < n; ++r) {
      if (r != victim) want &= ~(1 << r);
    }
    if (flag != want) {
      fail(("flag " + std::to_string(flag) + ", want " + std::to_string(want)).c_str(), comm);
    }
    if (failed_ranks(comm) != std::vector<int>{victim}) {
      fail("the failed set is not the victim alone", comm);
    }
    finish(comm, 3, 10 - (victim + 1));
  }
  if (strcmp(mode, "fork") == 0) {
    if (rank == 3) {
      // A child forked after init (as a DataLoader worker is) outlives its parent: it must not
      // keep the parent's recovery listener or its connections open.
      if (fork() == 0) {
        sleep(30);
        _exit(0);
      }
      sleep_ms(20);
      raise(SIGKILL);
    }
    sleep_ms(50);
    const auto start = std::chrono::steady_clock::now();
    int flag = 1;
    if (cclCommAgree(comm, &flag) != cclSuccess || flag != 1) fail("agree", comm);
    if (failed_ranks(comm) != std::vector<int>{3}) fail("rank 3 is not the failed rank", comm);
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) {
      fail("the agreement took more than 5 s: the forked child held the dead rank's sockets", comm);
    }
    finish(comm, 3, 10 - 4);
  }
  if (strcmp(mode, "shrink") == 0) {
    if (rank == 3) raise(SIGKILL);
    if (rank == 1) die_in(2);  // inside the shrink
    int excluded = 3;
    cclComm_t next = nullptr;
    const cclResult_t r = cclCommShrink(comm, &excluded, 1, &next, nullptr, CCL_SHRINK_DEFAULT);
    if (r == cclSuccess) {
      // Rank 1 died after the join: the shrunk communicator's first call fails, never hangs.
      long y = 1;
      if (cclAllReduce(&y, &y, 1, cclInt64, cclSum, next, nullptr) == cclSuccess && y != 3) {
        fail("a wrong sum on the shrunk communicator", next);
      }
      cclCommDestroy(next);
    } else if (r != cclRemoteError) {
      fail("the shrink that lost rank 1 did not give cclRemoteError", comm);
    } else {
      // Rank 1 is known dead now; rank 3 may not be (it was excluded, never asked).
      const std::vector<int> failed = failed_ranks(comm);
      if (failed.empty() || failed.front() != 1) fail("rank 1 is not among the failed", comm);
    }
    finish(comm, 2, 1 + 3);
  }
  if (strcmp(mode, "revoke") == 0) {
    if (rank == 2) raise(SIGKILL);
    sleep_ms(50);  // rank 2 is dead; ranks 1 and 3 enter the allreduce below
    if (rank == 0) {
      const auto start = std::chrono::steady_clock::now();
      if (cclCommRevoke(comm, 0) != cclSuccess) fail("revoke", comm);
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(2)) {
        fail("revoke took more than 2 s", comm);
      }
    } else {
      float big[1024] = {};
      const cclResult_t r = cclAllReduce(big, big, 1024, cclFloat, cclSum, comm, nullptr);
      if (r != cclRemoteError) fail("the allreduce did not fail with cclRemoteError", comm);
    }
    finish(comm, 3, 10 - 3);
  }
  fail("unknown mode", comm);
}
