// The host side of the CUDA kernels and of CUDA IPC, over the fake driver (fake_driver.h): the
// launches ccl makes (names, geometry, parameters) run the CPU kernel of the same name, so a
// wrong parameter order or a wrong kernel index gives a wrong result here.
#include <cuda.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "../support/rank_threads.h"
#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "child_process.h"
#include "cuda/cuda_driver.h"
#include "cuda/cuda_driver_api.h"
#include "cuda/cuda_ipc.h"
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_memory.h"
#include "fake_driver.h"

namespace {

namespace fake = ccl_test::fake_cuda;

class FakeCudaKernels : public testing::Test {
 protected:
  void SetUp() override { fake::install(); }
  void TearDown() override { fake::uninstall(); }
};

template <class T>
T* on_device(const std::vector<T>& host) {
  auto* d = static_cast<T*>(fake::device_alloc(host.size() * sizeof(T)));
  fake::to_device(d, host.data(), host.size() * sizeof(T));
  return d;
}

template <class T>
std::vector<T> from_device(const T* d, size_t count) {
  std::vector<T> h(count);
  fake::from_device(h.data(), d, count * sizeof(T));
  return h;
}

TEST_F(FakeCudaKernels, ReduceAndDivideLaunchTheKernelsOfTheirTypeAndOp) {
  if (!ccl::cuda::have_kernels()) GTEST_SKIP() << "this build has no CUDA kernels";
  const size_t n = 1000;
  std::vector<int32_t> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<int32_t>(i % 17) - 5;
    b[i] = static_cast<int32_t>(i % 11) * 3;
  }
  int32_t* da = on_device(a);
  int32_t* db = on_device(b);
  auto* dst = static_cast<int32_t*>(fake::device_alloc(n * 4));
  CUstream_st* stream = fake::create_stream();
  void* context = ccl::cuda::context_of(da);
  ccl::cuda::ContextScope scope(context);
  ccl::cuda::DeviceKernels kernels;
  const int before = fake::kernel_launches();
  for (cclRedOp_t op : {cclSum, cclProd, cclMax, cclMin, cclAvg}) {
    kernels.reduce(context, stream, dst, da, db, n, cclInt32, op);
    if (op == cclAvg) kernels.divide(context, stream, dst, n, cclInt32, 2);
    fake::synchronize(stream);
    std::vector<int32_t> want(n);
    ccl::reduce::reduce_kernel(cclInt32, op)(want.data(), a.data(), b.data(), n);
    if (op == cclAvg) ccl::reduce::divide_kernel(cclInt32)(want.data(), n, 2);
    EXPECT_EQ(from_device(dst, n), want) << ccl::reduce::op_name(op);
  }
  EXPECT_EQ(fake::kernel_launches() - before, 6);
  // In place (dst = a), and a type of another size.
  std::vector<double> x(n, 1.5), y(n, 2.25);
  double* dx = on_device(x);
  double* dy = on_device(y);
  kernels.reduce(context, stream, dx, dx, dy, n, cclFloat64, cclSum);
  fake::synchronize(stream);
  EXPECT_EQ(from_device(dx, n), std::vector<double>(n, 3.75));
  // No kernel for a PreMulSum op or a bad type: an error, no launch.
  const int launched = fake::kernel_launches();
  EXPECT_ANY_THROW(
      kernels.reduce(context, stream, dst, da, db, n, cclInt32, cclRedOp_t(cclNumOps)));
  EXPECT_ANY_THROW(kernels.reduce(context, stream, dst, da, db, n, cclNumTypes, cclSum));
  EXPECT_ANY_THROW(kernels.divide(context, stream, dst, n, cclInt32, 0));
  EXPECT_EQ(fake::kernel_launches(), launched);
  fake::destroy_stream(stream);
}

// `body` in another process, as CUDA IPC needs (a process cannot open its own handles).
bool in_another_process(const std::function<void()>& body) {
  return fake::child_passed(fake::start_child(body));
}

TEST_F(FakeCudaKernels, IpcExportsAndOpensEachAllocationOnce) {
  if (!fake::kForkedChildrenRun) GTEST_SKIP() << "a forked child cannot start threads under TSan";
  fake::make_context_current();
  auto* base = static_cast<char*>(fake::device_alloc(4096));
  std::vector<char> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  fake::to_device(base, bytes.data(), bytes.size());
  const ccl::cuda::IpcBuffer inner = ccl::cuda::export_buffer(base + 100);
  ASSERT_EQ(inner.valid, 1);
  EXPECT_EQ(inner.offset, 100u);
  EXPECT_EQ(inner.process, ccl::cuda::this_process());
  EXPECT_NE(inner.process, 0u);
  const ccl::cuda::IpcBuffer other = ccl::cuda::export_buffer(base + 2048);
  const ccl::cuda::DeviceUuid here = ccl::cuda::current_device_uuid();
  {
    // Its own process: the address itself, nothing opened (CUDA opens no handle of its own).
    ccl::cuda::IpcImports imports;
    EXPECT_EQ(imports.open(inner, here), base + 100);
    EXPECT_EQ(imports.opened(), 0u);
  }
  // Another process: the handle opened once for every buffer of the allocation, at an address of
  // its own, reading the exporter's bytes.
  EXPECT_TRUE(in_another_process([&] {
    EXPECT_NE(ccl::cuda::this_process(), inner.process);
    ccl::cuda::IpcImports imports;
    const int opens = fake::ipc_opens();
    auto* at = static_cast<char*>(imports.open(inner, here));
    auto* second = static_cast<char*>(imports.open(other, here));
    EXPECT_EQ(second - at, 2048 - 100);
    EXPECT_EQ(imports.opened(), 1u);
    EXPECT_EQ(fake::ipc_opens() - opens, 1);
    std::vector<char> seen(100);
    fake::from_device(seen.data(), at, seen.size());
    EXPECT_EQ(seen, std::vector<char>(bytes.begin() + 100, bytes.begin() + 200));
  }));
  // Host memory is not exported.
  std::vector<char> host(64);
  EXPECT_EQ(ccl::cuda::export_buffer(host.data()).valid, 0);
}

// The driver's IPC rules, which CUDA keeps between processes: a process cannot open its own
// handle; another opens it once until it closes it, at an address of its own; closing twice, or
// an address it did not open, and a malformed handle are refused.
TEST_F(FakeCudaKernels, IpcHandlesOpenOncePerProcessAndNotInTheirOwn) {
  if (!fake::kForkedChildrenRun) GTEST_SKIP() << "a forked child cannot start threads under TSan";
  fake::make_context_current();
  const ccl::cuda::DriverApi& api = *ccl::cuda::cuda_driver();
  void* base = fake::device_alloc(8192);
  CUipcMemHandle handle;
  ASSERT_EQ(api.ipc_get_mem_handle(&handle, reinterpret_cast<CUdeviceptr>(base)), CUDA_SUCCESS);
  CUipcMemHandle inside;
  EXPECT_EQ(api.ipc_get_mem_handle(&inside, reinterpret_cast<CUdeviceptr>(base) + 64),
            CUDA_ERROR_INVALID_VALUE)
      << "not the start of an allocation";
  CUdeviceptr opened = 0;
  EXPECT_EQ(api.ipc_open_mem_handle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT)
      << "its own process";
  EXPECT_TRUE(in_another_process([&] {
    CUdeviceptr at = 0, again = 0;
    ASSERT_EQ(api.ipc_open_mem_handle(&at, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS);
    EXPECT_NE(at, reinterpret_cast<CUdeviceptr>(base)) << "a mapping of its own";
    EXPECT_EQ(api.ipc_open_mem_handle(&again, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_ALREADY_MAPPED);
    EXPECT_EQ(api.ipc_close_mem_handle(at), CUDA_SUCCESS);
    EXPECT_EQ(api.ipc_close_mem_handle(at), CUDA_ERROR_INVALID_VALUE) << "closed already";
    EXPECT_EQ(api.ipc_open_mem_handle(&again, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS)
        << "open again after the close";
    CUipcMemHandle garbage;
    std::memset(&garbage, 0x5a, sizeof(garbage));
    EXPECT_EQ(api.ipc_open_mem_handle(&at, garbage, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_INVALID_VALUE);
  }));
  fake::device_free(base);
}

// A program that allocates for every call: past kKeepOpen handles, each call closes those it
// did not use, never one it did. In another process than the exporter's, as CUDA IPC is.
TEST_F(FakeCudaKernels, IpcImportsCloseWhatTheLastCallDidNotUse) {
  if (!fake::kForkedChildrenRun) GTEST_SKIP() << "a forked child cannot start threads under TSan";
  constexpr size_t kMany = ccl::cuda::IpcImports::kKeepOpen + 5;
  fake::make_context_current();
  std::vector<ccl::cuda::IpcBuffer> buffers;
  for (size_t i = 0; i < kMany; ++i)
    buffers.push_back(ccl::cuda::export_buffer(fake::device_alloc(256)));
  const ccl::cuda::DeviceUuid here = ccl::cuda::current_device_uuid();
  EXPECT_TRUE(in_another_process([&] {
    ccl::cuda::IpcImports imports;
    for (const auto& b : buffers) imports.open(b, here);  // one call uses them all
    imports.trim();
    EXPECT_EQ(imports.opened(), kMany);
    void* first = imports.open(buffers[0], here);  // the next call uses one
    imports.trim();
    EXPECT_EQ(imports.opened(), 1u);
    EXPECT_EQ(imports.open(buffers[0], here), first);
    imports.trim();  // at most kKeepOpen: nothing to close
    EXPECT_EQ(imports.opened(), 1u);
  }));
}

// The class of the link to a peer's GPU, as the driver tells it: the same device, NVLink (every
// atomic works over it), PCIe P2P, or none; a device this process does not see is none.
TEST_F(FakeCudaKernels, PeerLinksAreTheDriversClass) {
  auto uuid_of = [](int device) {
    fake::use_device(device);
    fake::make_context_current();
    return ccl::cuda::current_device_uuid();
  };
  using ccl::cuda::PeerLink;
  const struct {
    bool p2p, nvlink;
    PeerLink expected;
  } cases[] = {{true, true, PeerLink::NvLink},
               {true, false, PeerLink::Pcie},
               {false, false, PeerLink::None}};
  for (const auto& c : cases) {
    fake::set_devices(2, c.p2p, c.nvlink);
    const ccl::cuda::DeviceUuid second = uuid_of(1);
    const ccl::cuda::DeviceUuid first = uuid_of(0);
    EXPECT_EQ(ccl::cuda::link_to(first), PeerLink::SameDevice);
    EXPECT_EQ(ccl::cuda::link_to(second), c.expected) << ccl::cuda::peer_link_name(c.expected);
  }
  ccl::cuda::DeviceUuid unseen{};
  unseen.bytes[0] = 0x7f;
  EXPECT_EQ(ccl::cuda::link_to(unseen), PeerLink::None);
  // The slowest of several is the largest.
  EXPECT_LT(PeerLink::SameDevice, PeerLink::NvLink);
  EXPECT_LT(PeerLink::NvLink, PeerLink::Pcie);
  EXPECT_LT(PeerLink::Pcie, PeerLink::None);
}

TEST(IpcProcess, AForkedChildIsAnotherProcess) {
  const uint64_t parent = ccl::cuda::this_process();
  EXPECT_EQ(ccl::cuda::this_process(), parent);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const uint64_t child = ccl::cuda::this_process();
    _exit(write(fds[1], &child, sizeof(child)) == sizeof(child) ? 0 : 1);
  }
  uint64_t child = 0;
  EXPECT_EQ(read(fds[0], &child, sizeof(child)), static_cast<ssize_t>(sizeof(child)));
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_NE(child, 0u);
  EXPECT_NE(child, parent);
}

TEST(CudaKernelsWithoutDriver, RefuseClearly) {
  ccl::cuda::set_cuda_driver_for_testing(nullptr);
  ccl::cuda::DeviceKernels kernels;
  int x = 0;
  EXPECT_ANY_THROW(kernels.reduce(nullptr, nullptr, &x, &x, &x, 1, cclInt32, cclSum));
  EXPECT_EQ(ccl::cuda::export_buffer(&x).valid, 0);
}

}  // namespace
