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

// During a capture CUDA refuses the calls that could synchronize with the captured work or change
// memory under it (allocation, freeing, pinning, synchronizing), from every thread during a
// global capture, from the capturing thread during a thread-local one, and not at all during a
// relaxed one; the refused call invalidates the capture.
CUresult alloc_and_free_on(bool other_thread) {
  CUresult result = CUDA_SUCCESS;
  auto body = [&] {
    CUdeviceptr p = 0;
    result = ccl::cuda::cuda_driver()->mem_alloc(&p, 256);
    if (result == CUDA_SUCCESS) ccl::cuda::cuda_driver()->mem_free(p);
  };
  if (other_thread) {
    std::thread(body).join();
  } else {
    body();
  }
  return result;
}

TEST_F(FakeDriver, AGlobalCaptureRefusesAllocationOnEveryThread) {
  for (bool other_thread : {false, true}) {
    CUstream_st* s = fake::create_stream(false);
    fake::begin_capture(s, fake::CaptureMode::Global);
    EXPECT_EQ(alloc_and_free_on(other_thread), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
        << (other_thread ? "another thread" : "the capturing thread");
    EXPECT_EQ(fake::end_capture(s), nullptr) << "the refused call invalidates the capture";
    EXPECT_EQ(alloc_and_free_on(other_thread), CUDA_SUCCESS) << "after the capture";
    fake::destroy_stream(s);
  }
}

TEST_F(FakeDriver, AThreadLocalCaptureRefusesOnlyItsThread) {
  CUstream_st* s = fake::create_stream(false);
  fake::begin_capture(s, fake::CaptureMode::ThreadLocal);
  EXPECT_EQ(alloc_and_free_on(true), CUDA_SUCCESS);
  CUstream_st* other = fake::create_stream(false);
  EXPECT_EQ(api().stream_synchronize(other), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(fake::end_capture(s), nullptr);
  fake::destroy_stream(other);
  fake::destroy_stream(s);
}

TEST_F(FakeDriver, ARelaxedCaptureRefusesNothing) {
  CUstream_st* s = fake::create_stream(false);
  fake::begin_capture(s, fake::CaptureMode::Relaxed);
  EXPECT_EQ(alloc_and_free_on(false), CUDA_SUCCESS);
  EXPECT_EQ(alloc_and_free_on(true), CUDA_SUCCESS);
  fake::Graph* graph = fake::end_capture(s);
  EXPECT_NE(graph, nullptr);
  fake::destroy_graph(graph);
  fake::destroy_stream(s);
}

}  // namespace
