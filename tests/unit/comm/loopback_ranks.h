// Runs a test body on every rank of one loopback communicator: ranks as threads of this process.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/bootstrap/store.h"
#include "core/comm/comm.h"
#include "base/error.h"
#include "transport/loopback/loopback_transport.h"

namespace ccl::testing {

// body(comm) on `nranks` threads; an Error thrown by a rank fails the test, naming the rank.
inline void run_ranks(int nranks, const std::function<void(Communicator&)>& body) {
  InMemoryStore store;
  auto fabric = std::make_shared<transport::LoopbackFabric>(nranks);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        CommOptions options;
        options.rank = r;
        options.nranks = nranks;
        options.timeout = std::chrono::milliseconds(30000);
        options.loopback = fabric;
        auto comm = Communicator::create(options, store);
        body(*comm);
      } catch (const Error& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
        ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
}

}  // namespace ccl::testing
