// The fake driver's own rules, where it must be as strict as CUDA for the tests of ccl's CUDA path
// to mean anything: each test fails on the fake as it was before the rule.
#include "fake_driver.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "algorithms/reduce/cuda/cuda_launch.h"
#include "cuda/cuda_driver.h"
#include "cuda/cuda_driver_api.h"

namespace {

namespace fake = ccl_test::fake_cuda;
using namespace std::chrono_literals;

class FakeDriver : public testing::Test {
 protected:
  // Threads start with device 0's context current, as after cudaSetDevice.
  void SetUp() override {
    fake::install();
    fake::set_default_context(true);
    fake::make_context_current();  // this thread began before
  }
  void TearDown() override {
    fake::set_default_context(false);
    fake::uninstall();
  }
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

// A context per device, with its device's ordinal: memory knows its device and context, a thread
// on device 1 is in device 1's context (one context for every device hid a rank on the wrong one).
TEST_F(FakeDriver, ContextsArePerDeviceAndMemoryKnowsItsOwn) {
  fake::set_devices(2, true);
  CUcontext ctx0 = nullptr, ctx1 = nullptr;
  ASSERT_EQ(api().primary_ctx_retain(&ctx0, 0), CUDA_SUCCESS);
  ASSERT_EQ(api().primary_ctx_retain(&ctx1, 1), CUDA_SUCCESS);
  EXPECT_NE(ctx0, ctx1);
  fake::use_device(1);
  CUdevice device = -1;
  ASSERT_EQ(api().ctx_get_device(&device), CUDA_SUCCESS);
  EXPECT_EQ(device, 1);
  CUdeviceptr p = 0;
  ASSERT_EQ(api().mem_alloc(&p, 512), CUDA_SUCCESS);
  int ordinal = -1;
  CUcontext owner = nullptr;
  EXPECT_EQ(api().pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + 100),
            CUDA_SUCCESS);
  EXPECT_EQ(ordinal, 1);
  EXPECT_EQ(api().pointer_get_attribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_SUCCESS);
  EXPECT_EQ(owner, ctx1);
  EXPECT_EQ(api().mem_free(p), CUDA_SUCCESS);
  fake::use_device(0);
}

// Without a current context, what needs one fails with CUDA_ERROR_INVALID_CONTEXT (a ccl thread
// that forgot its ContextScope works on a fake that has one context for everything).
TEST_F(FakeDriver, CallsThatNeedAContextRefuseAThreadWithoutOne) {
  std::thread([&] {
    ASSERT_EQ(api().ctx_set_current(nullptr), CUDA_SUCCESS);
    CUstream stream = nullptr;
    CUevent event = nullptr;
    CUdeviceptr p = 0;
    void* pinned = nullptr;
    CUdevice device = 0;
    CUmodule module = nullptr;
    int image = 0;
    EXPECT_EQ(api().stream_create(&stream, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(api().event_create(&event, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(api().mem_alloc(&p, 64), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(api().mem_host_alloc(&pinned, 64, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(api().ctx_get_device(&device), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(api().module_load_data(&module, &image), CUDA_ERROR_INVALID_CONTEXT);
  }).join();
}

// A kernel runs in its module's context, on a stream of that context, and touches another
// device's memory only once peer access to it is enabled (a real GPU would fault).
TEST_F(FakeDriver, KernelsRunInTheirContextAndReachPeersOnlyWithPeerAccess) {
  fake::set_devices(2, true);
  namespace k = ccl::reduce::cuda;
  const char* copy = k::kernel_name_at(k::copy_kernel_index());
  int image = 0;
  CUmodule module0 = nullptr, module1 = nullptr;
  CUfunction copy0 = nullptr, copy1 = nullptr;
  fake::use_device(1);
  ASSERT_EQ(api().module_load_data(&module1, &image), CUDA_SUCCESS);
  ASSERT_EQ(api().module_get_function(&copy1, module1, copy), CUDA_SUCCESS);
  void* theirs = fake::device_alloc(256);
  fake::use_device(0);
  ASSERT_EQ(api().module_load_data(&module0, &image), CUDA_SUCCESS);
  ASSERT_EQ(api().module_get_function(&copy0, module0, copy), CUDA_SUCCESS);
  void* mine = fake::device_alloc(256);
  CUstream_st* stream = fake::create_stream(false);
  unsigned long long bytes = 256;
  void* params[] = {&mine, &theirs, &bytes};
  auto launch = [&](CUfunction fn) {
    return api().launch_kernel(fn, 1, 1, 1, k::kThreadsPerBlock, 1, 1, 0, stream, params, nullptr);
  };
  EXPECT_EQ(launch(copy1), CUDA_ERROR_INVALID_CONTEXT) << "device 1's kernel on device 0's stream";
  EXPECT_EQ(launch(copy0), CUDA_ERROR_ILLEGAL_ADDRESS) << "device 1's memory without peer access";
  CUcontext ctx1 = nullptr;
  ASSERT_EQ(api().primary_ctx_retain(&ctx1, 1), CUDA_SUCCESS);
  ASSERT_EQ(api().ctx_enable_peer_access(ctx1, 0), CUDA_SUCCESS);
  EXPECT_EQ(launch(copy0), CUDA_SUCCESS);
  fake::synchronize(stream);
  fake::destroy_stream(stream);
  fake::device_free(mine);
  fake::device_free(theirs);
}

}  // namespace
