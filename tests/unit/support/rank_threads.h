// Runs the ranks of one communicator as threads of this process (the shm transport works between
// threads), for the tests of the C++ API and of the training layer.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.hpp"

namespace ccl_test {

// Every wait of a test communicator is bounded, so a broken collective fails instead of hanging.
inline ccl::Config test_config() {
  return ccl::Config{.timeout = std::chrono::seconds(30), .name = "cpp_api_test"};
}

// Runs body(comm) on `nranks` threads, each one rank. Rank 0's thread makes the unique id and
// hands it to the others, as rank 0 of a real job would. An exception in a rank is a test
// failure that names the rank (a failed rank's peers then fail or time out, bounded).
// `before_init(rank)` runs on the rank's thread before its communicator is made (a test that
// puts ranks on devices of their own).
template <class Body>
void run_ranks(int nranks, Body body, const ccl::Config& config = test_config(),
               const std::function<void(int)>& before_init = {}) {
  std::promise<ccl::UniqueId> id_promise;
  std::shared_future<ccl::UniqueId> id = id_promise.get_future().share();
  std::vector<std::string> failures(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        if (r == 0) {
          try {
            id_promise.set_value(ccl::get_unique_id());
          } catch (...) {
            id_promise.set_exception(std::current_exception());
            throw;
          }
        }
        if (before_init) before_init(r);
        ccl::Communicator comm = ccl::Communicator::init_rank(nranks, id.get(), r, config);
        body(comm);
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r << " of " << nranks;
  }
}

// The test name suffix of a rank-count parameter.
inline std::string ranks_name(const testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "ranks";
}

}  // namespace ccl_test
