// The host side of the CUDA kernels and of CUDA IPC, over the fake driver (fake_driver.h): the
// launches ccl makes (names, geometry, parameters) run the CPU kernel of the same name, so a
// wrong parameter order or a wrong kernel index gives a wrong result here.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../support/rank_threads.h"
#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "cuda/cuda_driver.h"
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

TEST_F(FakeCudaKernels, IpcExportsAndOpensEachAllocationOnce) {
  auto* base = static_cast<char*>(fake::device_alloc(4096));
  const ccl::cuda::IpcBuffer inner = ccl::cuda::export_buffer(base + 100);
  ASSERT_EQ(inner.valid, 1);
  EXPECT_EQ(inner.offset, 100u);
  EXPECT_EQ(inner.process, ccl::cuda::this_process());
  EXPECT_NE(inner.process, 0u);
  ccl::cuda::IpcImports imports;
  const ccl::cuda::ContextScope scope(ccl::cuda::context_of(base));
  const ccl::cuda::DeviceUuid here = ccl::cuda::current_device_uuid();
  // Its own process: the address itself, nothing opened.
  const int opens = fake::ipc_opens();
  EXPECT_EQ(imports.open(inner, here), base + 100);
  EXPECT_EQ(imports.opened(), 0u);
  // As another process sees it: the handle opened once for every buffer of the allocation.
  ccl::cuda::IpcBuffer remote = inner;
  remote.process = inner.process + 2;  // another process, whatever its pid
  remote.address = 0;
  EXPECT_EQ(imports.open(remote, here), base + 100);
  ccl::cuda::IpcBuffer other = ccl::cuda::export_buffer(base + 2048);
  other.process = remote.process;
  EXPECT_EQ(imports.open(other, here), base + 2048);
  EXPECT_EQ(imports.opened(), 1u);
  EXPECT_EQ(fake::ipc_opens() - opens, 1);
  // Host memory is not exported.
  std::vector<char> host(64);
  EXPECT_EQ(ccl::cuda::export_buffer(host.data()).valid, 0);
}

// Allreduce between the ranks of one host over IPC and the kernels (core/device_ipc.h): every
// type's exact integer values and every op, counts with a remainder and smaller than the rank
// count, in place; the kernels really ran (launch count), and a rank with host buffers sends
// every rank the host-staged way instead, with the same results.
class DeviceIpcAllReduce : public FakeCudaKernels, public testing::WithParamInterface<int> {};

int64_t input_of(int rank, size_t i) { return static_cast<int64_t>((rank + 2) * (i % 7 + 1)); }

template <class T>
void expect_allreduce(ccl::Communicator& comm, size_t count, cclDataType_t type, cclRedOp_t op,
                      bool in_place, bool device) {
  const int n = comm.size(), r = comm.rank();
  std::vector<T> in(count), want(count);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<T>(input_of(r, i));
  for (size_t i = 0; i < count; ++i) {
    want[i] = static_cast<T>(input_of(0, i));
    for (int q = 1; q < n; ++q) {
      const T x = static_cast<T>(input_of(q, i));
      ccl::reduce::reduce_kernel(type, op == cclAvg ? cclSum : op)(&want[i], &want[i], &x, 1);
    }
    if (op == cclAvg) ccl::reduce::divide_kernel(type)(&want[i], 1, n);
  }
  std::vector<T> out(count, T(0));
  T* din = device ? on_device(in) : in.data();
  T* dout = in_place ? din : (device ? on_device(out) : out.data());
  ASSERT_EQ(cclAllReduce(din, dout, count, type, op, comm.get(), nullptr), cclSuccess)
      << cclGetLastError(comm.get());
  EXPECT_EQ(device ? from_device(dout, count) : std::vector<T>(dout, dout + count), want)
      << "count " << count << " op " << ccl::reduce::op_name(op) << " rank " << r;
}

TEST_P(DeviceIpcAllReduce, ReducesEveryPeersBuffersWhereTheyAre) {
  if (!ccl::cuda::have_kernels()) GTEST_SKIP() << "this build has no CUDA kernels";
  const int n = GetParam();
  const int before = fake::kernel_launches();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    for (cclRedOp_t op : {cclSum, cclProd, cclMax, cclMin, cclAvg}) {
      for (size_t count : {size_t{1001}, size_t{3}}) {
        for (bool in_place : {false, true}) {
          expect_allreduce<int32_t>(comm, count, cclInt32, op, in_place, true);
        }
      }
    }
    expect_allreduce<double>(comm, 4096, cclFloat64, cclSum, false, true);
    expect_allreduce<uint8_t>(comm, 77, cclUint8, cclMax, true, true);
  });
  // Each rank launched n-1 reduces (and avg's divide) per allreduce with a slice of its own.
  EXPECT_GE(fake::kernel_launches() - before, (n - 1) * 20);
}

TEST_P(DeviceIpcAllReduce, ARankWithHostBuffersTakesEveryoneTheStagedWay) {
  const int n = GetParam();
  const int before = fake::kernel_launches();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    expect_allreduce<int32_t>(comm, 1001, cclInt32, cclSum, false, comm.rank() != n - 1);
    expect_allreduce<int32_t>(comm, 1001, cclInt32, cclMax, true, comm.rank() != 0);
  });
  EXPECT_EQ(fake::kernel_launches(), before);
}

TEST_P(DeviceIpcAllReduce, CclCudaIpcZeroStagesThroughTheHost) {
  setenv("CCL_CUDA_IPC", "0", 1);
  const int n = GetParam();
  const int before = fake::kernel_launches();
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    expect_allreduce<int32_t>(comm, 1001, cclInt32, cclSum, false, true);
  });
  unsetenv("CCL_CUDA_IPC");
  EXPECT_EQ(fake::kernel_launches(), before);
}

// Ranks on two GPUs (rank % 2): with peer access they reduce through IPC; without it (no P2P
// between the GPUs) every rank stages through the host, with the same results. Returns the
// kernels launched.
int allreduce_on_two_gpus(int nranks, bool p2p) {
  fake::set_devices(2, p2p);
  const int before = fake::kernel_launches();
  ccl_test::run_ranks(nranks, [&](ccl::Communicator& comm) {
    fake::use_device(comm.rank() % 2);
    expect_allreduce<int32_t>(comm, 1001, cclInt32, cclSum, false, true);
    expect_allreduce<int32_t>(comm, 1001, cclInt32, cclMax, true, true);
  });
  return fake::kernel_launches() - before;
}

// The ranks are threads of one process: each reads the other GPU's buffers at their own
// addresses, so peer access is enabled between the two devices, once each way.
TEST_P(DeviceIpcAllReduce, GpusWithPeerAccessReduceWhereTheBuffersAre) {
  if (!ccl::cuda::have_kernels()) GTEST_SKIP() << "this build has no CUDA kernels";
  EXPECT_GT(allreduce_on_two_gpus(GetParam(), true), 0);
  EXPECT_EQ(fake::peer_access_enables(), 2);  // 0 -> 1 and 1 -> 0, in the first run only
}

TEST_P(DeviceIpcAllReduce, GpusWithoutPeerAccessStageThroughTheHost) {
  EXPECT_EQ(allreduce_on_two_gpus(GetParam(), false), 0);
}

// A rank that cannot reach a peer's buffer (here: peer access refused, as a sandbox might) tells
// the others before any reads: every rank stages, with the same results, and the path stays off.
TEST_P(DeviceIpcAllReduce, ARankThatCannotOpenAPeersBufferStagesEveryone) {
  fake::refuse_peer_access_enable(true);
  EXPECT_EQ(allreduce_on_two_gpus(GetParam(), true), 0);
}

// A program that allocates for every call: past kKeepOpen handles, each call closes those it
// did not use, never one it did.
TEST_F(FakeCudaKernels, IpcImportsCloseWhatTheLastCallDidNotUse) {
  constexpr size_t kMany = ccl::cuda::IpcImports::kKeepOpen + 5;
  ccl::cuda::IpcImports imports;
  auto* first = static_cast<char*>(fake::device_alloc(256));
  const ccl::cuda::ContextScope scope(ccl::cuda::context_of(first));
  const ccl::cuda::DeviceUuid here = ccl::cuda::current_device_uuid();
  auto remote = [&](void* p) {
    ccl::cuda::IpcBuffer b = ccl::cuda::export_buffer(p);
    b.process = ccl::cuda::this_process() + 2;
    return b;
  };
  std::vector<ccl::cuda::IpcBuffer> buffers{remote(first)};
  for (size_t i = 1; i < kMany; ++i) buffers.push_back(remote(fake::device_alloc(256)));
  for (const auto& b : buffers) imports.open(b, here);  // one call uses them all
  imports.trim();
  EXPECT_EQ(imports.opened(), kMany);
  EXPECT_EQ(imports.open(buffers[0], here), first);  // the next call uses one
  imports.trim();
  EXPECT_EQ(imports.opened(), 1u);
  EXPECT_EQ(imports.open(buffers[0], here), first);
  imports.trim();  // at most kKeepOpen: nothing to close
  EXPECT_EQ(imports.opened(), 1u);
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

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceIpcAllReduce, testing::Values(2, 3, 4), ccl_test::ranks_name);

TEST(CudaKernelsWithoutDriver, RefuseClearly) {
  ccl::cuda::set_cuda_driver_for_testing(nullptr);
  ccl::cuda::DeviceKernels kernels;
  int x = 0;
  EXPECT_ANY_THROW(kernels.reduce(nullptr, nullptr, &x, &x, &x, 1, cclInt32, cclSum));
  EXPECT_EQ(ccl::cuda::export_buffer(&x).valid, 0);
}

}  // namespace
