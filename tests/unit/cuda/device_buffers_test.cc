// CUDA device buffers without a GPU: the fake driver (fake_driver.h) makes device memory that the
// host cannot touch, so a device pointer taken for a host one faults. Every collective and a
// group of sends and receives on device buffers, at 1 to 4 ranks (threads, shm), and the pointer
// kinds with and without a driver.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/ccl.h"
#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"
#include "fake_driver.h"

namespace {

namespace fake = ccl_test::fake_cuda;
using ccl::MemoryKind;

class FakeCuda : public testing::Test {
 protected:
  void SetUp() override { fake::install(); }
  void TearDown() override { fake::uninstall(); }
};

TEST(PointerKind, WithoutADriverEverythingIsHost) {
  ccl::cuda::set_cuda_driver_for_testing(nullptr);
  int on_stack = 0;
  std::vector<float> on_heap(4);
  EXPECT_EQ(ccl::cuda::pointer_kind(&on_stack), MemoryKind::Host);
  EXPECT_EQ(ccl::cuda::pointer_kind(on_heap.data()), MemoryKind::Host);
  EXPECT_EQ(ccl::cuda::pointer_kind(nullptr), MemoryKind::Host);
  EXPECT_NE(ccl::cuda::cuda_unavailable_reason(), "");
}

TEST_F(FakeCuda, DeviceMemoryIsDeviceAndEverythingElseHost) {
  void* device = fake::device_alloc(256);
  std::vector<float> on_heap(4);
  EXPECT_EQ(ccl::cuda::pointer_kind(device), MemoryKind::CudaDevice);
  EXPECT_EQ(ccl::cuda::pointer_kind(static_cast<char*>(device) + 100), MemoryKind::CudaDevice);
  EXPECT_EQ(ccl::cuda::pointer_kind(on_heap.data()), MemoryKind::Host);
  fake::make_context_current();  // cuMemHostAlloc pins in the current context
  ccl::cuda::PinnedBuffer pinned;
  EXPECT_EQ(ccl::cuda::pointer_kind(pinned.reserve(64)), MemoryKind::Host);
}

using FakeCudaDeathTest = FakeCuda;
TEST_F(FakeCudaDeathTest, TheHostCannotTouchFakeDeviceMemory) {
  // What makes the tests below mean something: a device pointer used as a host one faults.
  auto* device = static_cast<volatile char*>(fake::device_alloc(64));
  EXPECT_DEATH(device[0] = 1, "");
}

// float values of (rank, index) that sum exactly
float value(int rank, size_t i) {
  return static_cast<float>(rank * 1000 + static_cast<int>(i % 97));
}

std::vector<float> pattern(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(rank, i);
  return v;
}

float* device_copy(const std::vector<float>& host) {
  auto* d = static_cast<float*>(fake::device_alloc(std::max<size_t>(host.size(), 1) * 4));
  fake::to_device(d, host.data(), host.size() * 4);
  return d;
}

std::vector<float> host_copy(const float* device, size_t count) {
  std::vector<float> h(count);
  fake::from_device(h.data(), device, count * 4);
  return h;
}

void expect_ok(cclResult_t result, cclComm_t comm, const char* what) {
  ASSERT_EQ(result, cclSuccess) << what << ": " << cclGetLastError(comm);
}

TEST_F(FakeCuda, PreMulSumRefusesADeviceScalarAndTakesAHostOne) {
  // ccl reads a PreMulSum scalar on the host; one in device memory is refused, not read.
  ccl_test::run_ranks(1, [&](ccl::Communicator& comm) {
    cclComm_t c = comm.get();
    float* device_scalar = device_copy({2.0f});
    cclRedOp_t op;
    for (int residence : {0, 1}) {
      EXPECT_EQ(cclRedOpCreatePreMulSum(&op, device_scalar, cclFloat, residence, c),
                cclInvalidUsage);
      EXPECT_NE(std::string(cclGetLastError(c)).find("device memory"), std::string::npos);
    }
    float host_scalar = 2.0f;
    ASSERT_EQ(cclRedOpCreatePreMulSum(&op, &host_scalar, cclFloat, 1, c), cclSuccess);
    EXPECT_EQ(cclRedOpDestroy(op, c), cclSuccess);
  });
}

class DeviceCollectives : public FakeCuda, public testing::WithParamInterface<int> {};

TEST_P(DeviceCollectives, EveryCollectiveOnDeviceBuffers) {
  const int n = GetParam();
  constexpr size_t kCount = 1000;
  ccl_test::run_ranks(n, [&](ccl::Communicator& comm) {
    const int r = comm.rank();
    cclComm_t c = comm.get();
    std::vector<float> sum(kCount, 0.0f);
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < kCount; ++i) sum[i] += value(q, i);
    }

    // allreduce, out of place and in place
    float* in = device_copy(pattern(r, kCount));
    float* out = device_copy(std::vector<float>(kCount, -1.0f));
    expect_ok(cclAllReduce(in, out, kCount, cclFloat, cclSum, c, nullptr), c, "allreduce");
    EXPECT_EQ(host_copy(out, kCount), sum);
    EXPECT_EQ(host_copy(in, kCount), pattern(r, kCount));  // the input is left alone
    expect_ok(cclAllReduce(in, in, kCount, cclFloat, cclSum, c, nullptr), c, "allreduce in place");
    EXPECT_EQ(host_copy(in, kCount), sum);

    // broadcast from the last rank; reduce to rank 0 (a non-root's recvbuff is not touched)
    float* b = device_copy(r == n - 1 ? pattern(7, kCount) : std::vector<float>(kCount, 0.0f));
    expect_ok(cclBroadcast(b, b, kCount, cclFloat, n - 1, c, nullptr), c, "broadcast");
    EXPECT_EQ(host_copy(b, kCount), pattern(7, kCount));
    float* red_in = device_copy(pattern(r, kCount));
    float* red_out = device_copy(std::vector<float>(kCount, -1.0f));
    expect_ok(cclReduce(red_in, red_out, kCount, cclFloat, cclSum, 0, c, nullptr), c, "reduce");
    EXPECT_EQ(host_copy(red_out, kCount), r == 0 ? sum : std::vector<float>(kCount, -1.0f));

    // allgather, in place: rank r's block of recvbuff is its input
    std::vector<float> gathered;
    for (int q = 0; q < n; ++q) {
      const auto block = pattern(q, kCount);
      gathered.insert(gathered.end(), block.begin(), block.end());
    }
    std::vector<float> mine(kCount * n, 0.0f);
    std::copy_n(pattern(r, kCount).begin(), kCount, mine.begin() + static_cast<long>(r * kCount));
    float* g = device_copy(mine);
    expect_ok(cclAllGather(g + r * kCount, g, kCount, cclFloat, c, nullptr), c, "allgather");
    EXPECT_EQ(host_copy(g, kCount * n), gathered);

    // reduce-scatter, in place: recvbuff = sendbuff + rank * recvcount
    std::vector<float> full(kCount * n);
    for (size_t i = 0; i < full.size(); ++i) full[i] = value(r, i);
    float* rs = device_copy(full);
    expect_ok(cclReduceScatter(rs, rs + r * kCount, kCount, cclFloat, cclSum, c, nullptr), c,
              "reducescatter");
    std::vector<float> expect_rs(kCount, 0.0f);
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < kCount; ++i) expect_rs[i] += value(q, r * kCount + i);
    }
    EXPECT_EQ(host_copy(rs + r * kCount, kCount), expect_rs);

    // alltoall: block q of rank r's input goes to rank q's block r
    std::vector<float> a2a(kCount * n);
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < kCount; ++i) a2a[q * kCount + i] = static_cast<float>(r * 100 + q);
    }
    float* a_in = device_copy(a2a);
    float* a_out = device_copy(std::vector<float>(kCount * n, -1.0f));
    expect_ok(cclAlltoAll(a_in, a_out, kCount, cclFloat, c, nullptr), c, "alltoall");
    const auto got = host_copy(a_out, kCount * n);
    for (int q = 0; q < n; ++q) EXPECT_EQ(got[q * kCount], static_cast<float>(q * 100 + r));

    // allgatherv: rank q sends q + 1 elements, packed in rank order
    std::vector<size_t> counts(n), displs(n);
    for (int q = 0; q < n; ++q) {
      counts[q] = static_cast<size_t>(q + 1);
      displs[q] = q == 0 ? 0 : displs[q - 1] + counts[q - 1];
    }
    float* v_in = device_copy(std::vector<float>(counts[r], static_cast<float>(r)));
    float* v_out = device_copy(std::vector<float>(displs[n - 1] + counts[n - 1], -1.0f));
    expect_ok(
        cclAllGatherV(v_in, counts[r], v_out, counts.data(), displs.data(), cclFloat, c, nullptr),
        c, "allgatherv");
    const auto gv = host_copy(v_out, displs[n - 1] + counts[n - 1]);
    for (int q = 0; q < n; ++q) EXPECT_EQ(gv[displs[q] + counts[q] - 1], static_cast<float>(q));

    // a ring of sends and receives in one group
    float* s = device_copy(pattern(r, kCount));
    float* rcv = device_copy(std::vector<float>(kCount, -1.0f));
    expect_ok(cclGroupStart(), c, "group start");
    expect_ok(cclSend(s, kCount, cclFloat, (r + 1) % n, c, nullptr), c, "send");
    expect_ok(cclRecv(rcv, kCount, cclFloat, (r + n - 1) % n, c, nullptr), c, "recv");
    expect_ok(cclGroupEnd(), c, "group end");
    EXPECT_EQ(host_copy(rcv, kCount), pattern((r + n - 1) % n, kCount));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCollectives, testing::Values(1, 2, 3, 4),
                         ccl_test::ranks_name);

}  // namespace
