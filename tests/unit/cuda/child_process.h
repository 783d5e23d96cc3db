// A peer as another process, for what CUDA allows only between processes (IPC handles): a body
// run in a forked child with a CUDA context current, whose exit says whether its expectations
// held. Used by the IPC tests and the device world of forked ranks.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "fake_driver.h"

namespace ccl_test::fake_cuda {

// Forks: the child makes its device's context current (as after cudaSetDevice), runs `body`, and
// exits 0, or 1 after a failed expectation. Returns the child's pid (-1 if fork failed).
inline pid_t start_child(const std::function<void()>& body) {
  const pid_t child = fork();
  if (child == 0) {
    make_context_current();
    body();
    _exit(testing::Test::HasFailure() ? 1 : 0);
  }
  return child;
}

// Whether `child` exited 0 within `limit`; past it the child is killed and a failure added.
inline bool child_passed(pid_t child, std::chrono::seconds limit = std::chrono::seconds(60)) {
  if (child < 0) {
    ADD_FAILURE() << "fork failed";
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child) {
      return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ADD_FAILURE() << "a child process did not end in " << limit.count() << " s";
  return false;
}

}  // namespace ccl_test::fake_cuda
