// Runs the ranks of one communicator as threads of this process through the C API (the shm
// transport works between threads), for tests that also include ccl's internal headers (which
// rank_threads.h, on the C++ API, would clash with).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace ccl_test {

// body(rank, comm) on `nranks` threads, each a rank of one communicator made with `config` (its
// commName and timeoutMs: every wait bounded); the body owns its communicator (destroys or aborts
// it). A rank whose init fails is a test failure naming it. Returns when every thread is joined.
inline void run_c_ranks(int nranks, const cclConfig_t& config,
                        const std::function<void(int, cclComm_t)>& body) {
  cclUniqueId id;
  ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      cclConfig_t own = config;
      cclComm_t comm = nullptr;
      if (cclCommInitRankConfig(&comm, nranks, id, r, &own) != cclSuccess) {
        ADD_FAILURE() << "rank " << r << " of " << nranks << ": init failed";
        return;
      }
      body(r, comm);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace ccl_test
