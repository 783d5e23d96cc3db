// The fake driver's own rules, where it must be as strict as CUDA for the tests of ccl's CUDA path
// to mean anything: each test fails on the fake as it was before the rule.
#include "fake_driver.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cuda/cuda_driver.h"
#include "cuda/cuda_driver_api.h"

namespace {

namespace fake = ccl_test::fake_cuda;
using namespace std::chrono_literals;

class FakeDriver : public testing::Test {
 protected:
  void SetUp() override { fake::install(); }
  void TearDown() override { fake::uninstall(); }
  const ccl::cuda::DriverApi& api() const { return *ccl::cuda::cuda_driver(); }
};

// CUDA runs the host functions of every stream of a process on one thread, one at a time (a host
// function that waits for another stream's would wait forever): two streams' functions, the
// first slow, run on the same thread and never overlap.
struct HostCall {
  std::atomic<int>* running;
  std::atomic<int>* overlaps;
  std::thread::id* thread;
  std::chrono::milliseconds work;
};

void host_call(void* data) {
  auto* call = static_cast<HostCall*>(data);
  if (call->running->fetch_add(1) != 0) call->overlaps->fetch_add(1);
  *call->thread = std::this_thread::get_id();
  std::this_thread::sleep_for(call->work);
  call->running->fetch_sub(1);
}

TEST_F(FakeDriver, HostFunctionsOfEveryStreamRunOnOneThreadOneAtATime) {
  CUstream_st* a = fake::create_stream(false);
  CUstream_st* b = fake::create_stream(false);
  std::atomic<int> running{0}, overlaps{0};
  std::thread::id on_a, on_b;
  HostCall slow{&running, &overlaps, &on_a, 100ms};
  HostCall quick{&running, &overlaps, &on_b, 0ms};
  ASSERT_EQ(api().launch_host_func(a, host_call, &slow), CUDA_SUCCESS);
  std::this_thread::sleep_for(20ms);  // a's function is running
  ASSERT_EQ(api().launch_host_func(b, host_call, &quick), CUDA_SUCCESS);
  fake::synchronize(a);
  fake::synchronize(b);
  EXPECT_EQ(overlaps.load(), 0) << "two streams' host functions ran at once";
  EXPECT_EQ(on_a, on_b) << "two streams' host functions ran on two threads";
  EXPECT_EQ(api().launch_host_func(a, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  fake::destroy_stream(a);
  fake::destroy_stream(b);
}

}  // namespace
