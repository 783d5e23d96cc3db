// cclStreamFromCuda over the fake driver (fake_driver.h), whose streams run their work later, in
// order, on threads of their own: an operation must wait for the CUDA work queued before it, and
// the CUDA work queued after it must wait for it, with cuStreamWaitValue32 and with the
// host-function fallback; a failed operation must not leave the CUDA stream blocked.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/ccl.h"
#include "cuda/cuda_driver.h"
#include "fake_driver.h"

namespace {

namespace fake = ccl_test::fake_cuda;
using namespace std::chrono_literals;

class CudaStream : public testing::Test {
 protected:
  // Rank threads start with device 0's context current, as after cudaSetDevice: the legacy
  // stream is the current context's.
  void SetUp() override {
    fake::install();
    fake::set_default_context(true);
  }
  void TearDown() override {
    fake::refuse_stream_wait_value(false);
    fake::set_default_context(false);
    fake::uninstall();
  }
};

// Rank r: a "kernel" on its CUDA stream fills the input late (after 100 ms), an allreduce on the
// ccl stream of that CUDA stream, then a "kernel" that reads the output. The reader must see the
// sum: the allreduce waited for the writer, and the reader for the allreduce.
// On `legacy`, the CUDA stream is the legacy default stream (NULL), which the ccl stream holds
// while its operation runs: ccl's own copy stream must not wait behind it (it would wait for the
// operation it serves; the fake aborts after 20 s of such a wait, as a real GPU would hang).
void ordered_allreduce(int nranks, bool legacy = false) {
  constexpr size_t kCount = 4096;
  ccl_test::run_ranks(nranks, [&](ccl::Communicator& comm) {
    const int r = comm.rank();
    CUstream_st* cuda = legacy ? nullptr : fake::create_stream();
    cclStream_t stream = nullptr;
    ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess) << cclGetLastError(nullptr);
    auto* in = static_cast<float*>(fake::device_alloc(kCount * 4));
    auto* out = static_cast<float*>(fake::device_alloc(kCount * 4));
    fake::to_device(in, std::vector<float>(kCount, 0.0f).data(), kCount * 4);  // stale
    std::atomic<bool> written{false};
    fake::launch(cuda, [&] {
      std::this_thread::sleep_for(100ms);
      auto* p = static_cast<float*>(fake::alias(in));
      for (size_t i = 0; i < kCount; ++i) p[i] = static_cast<float>(r + 1);
      written = true;
    });
    ASSERT_EQ(cclAllReduce(in, out, kCount, cclFloat, cclSum, comm.get(), stream), cclSuccess);
    EXPECT_FALSE(written.load()) << "the call returned only after the CUDA work before it";
    std::vector<float> seen(kCount, -1.0f);
    fake::launch(cuda, [&] {
      const auto* p = static_cast<const float*>(fake::alias(out));
      std::copy_n(p, kCount, seen.begin());
    });
    fake::synchronize(cuda);  // the reader ran: so did the allreduce it waited for
    const float sum = static_cast<float>(nranks * (nranks + 1) / 2);
    EXPECT_EQ(seen, std::vector<float>(kCount, sum));
    EXPECT_EQ(cclStreamSynchronize(stream), cclSuccess);
    EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
    if (cuda != nullptr) fake::destroy_stream(cuda);
  });
}

TEST_F(CudaStream, OrdersAnAllreduceBothWaysOneRank) { ordered_allreduce(1); }
TEST_F(CudaStream, OrdersAnAllreduceBothWaysTwoRanks) { ordered_allreduce(2); }
TEST_F(CudaStream, OnTheLegacyStreamOneRank) { ordered_allreduce(1, true); }
// (Not two ranks: threads of one process share its legacy stream, and the second rank's
// operation would wait behind the first's hold, which waits for the second rank.)

// A blocking call (no ccl stream) on device buffers reads what the CUDA work queued before it
// wrote, on the legacy stream or on a blocking stream (which the legacy stream's order covers),
// although ccl copies on a non-blocking stream of its own.
void blocking_allreduce_after(int nranks, bool writer_on_legacy) {
  constexpr size_t kCount = 4096;
  ccl_test::run_ranks(nranks, [&](ccl::Communicator& comm) {
    const int r = comm.rank();
    CUstream_st* writer = writer_on_legacy ? nullptr : fake::create_stream();
    auto* in = static_cast<float*>(fake::device_alloc(kCount * 4));
    auto* out = static_cast<float*>(fake::device_alloc(kCount * 4));
    fake::to_device(in, std::vector<float>(kCount, 0.0f).data(), kCount * 4);  // stale
    fake::launch(writer, [&] {
      std::this_thread::sleep_for(100ms);
      auto* p = static_cast<float*>(fake::alias(in));
      for (size_t i = 0; i < kCount; ++i) p[i] = static_cast<float>(r + 1);
    });
    ASSERT_EQ(cclAllReduce(in, out, kCount, cclFloat, cclSum, comm.get(), nullptr), cclSuccess)
        << cclGetLastError(nullptr);
    std::vector<float> seen(kCount, -1.0f);
    fake::from_device(seen.data(), out, kCount * 4);
    const float sum = static_cast<float>(nranks * (nranks + 1) / 2);
    EXPECT_EQ(seen, std::vector<float>(kCount, sum));
    if (writer != nullptr) fake::destroy_stream(writer);
  });
}

TEST_F(CudaStream, BlockingCallAfterTheLegacyStreamOneRank) { blocking_allreduce_after(1, true); }
TEST_F(CudaStream, BlockingCallAfterTheLegacyStreamTwoRanks) { blocking_allreduce_after(2, true); }
TEST_F(CudaStream, BlockingCallAfterABlockingStreamTwoRanks) { blocking_allreduce_after(2, false); }

TEST_F(CudaStream, HostFunctionHoldsTheStreamWhereWaitValueIsRefused) {
  fake::refuse_stream_wait_value(true);
  ordered_allreduce(2);
}

TEST_F(CudaStream, AFailedOperationLetsTheCudaStreamGoOn) {
  // Rank 1 leaves at once: rank 0's allreduce fails (its peer is gone, or the timeout), and the
  // CUDA work queued after it still runs.
  ccl_test::run_ranks(
      2,
      [&](ccl::Communicator& comm) {
        if (comm.rank() == 1) return;
        CUstream_st* cuda = fake::create_stream();
        cclStream_t stream = nullptr;
        ASSERT_EQ(cclStreamFromCuda(cuda, &stream), cclSuccess);
        auto* buf = static_cast<float*>(fake::device_alloc(64 * 4));
        ASSERT_EQ(cclAllReduce(buf, buf, 64, cclFloat, cclSum, comm.get(), stream), cclSuccess);
        std::atomic<bool> after{false};
        fake::launch(cuda, [&] { after = true; });
        fake::synchronize(cuda);
        EXPECT_TRUE(after.load());
        EXPECT_NE(cclStreamSynchronize(stream), cclSuccess);
        EXPECT_EQ(cclStreamDestroy(stream), cclSuccess);
        fake::destroy_stream(cuda);
      },
      ccl::Config{.timeout = 2s, .name = "cuda_stream_failure"});
}

TEST(CudaStreamNoDriver, IsInvalidUsageAndSaysWhy) {
  ccl::cuda::set_cuda_driver_for_testing(nullptr);
  cclStream_t stream = nullptr;
  EXPECT_EQ(cclStreamFromCuda(nullptr, &stream), cclInvalidUsage);
  EXPECT_EQ(stream, nullptr);
  EXPECT_NE(std::string(cclGetLastError(nullptr)).find("no CUDA driver"), std::string::npos)
      << cclGetLastError(nullptr);
  EXPECT_EQ(cclStreamFromCuda(nullptr, nullptr), cclInvalidArgument);
}

}  // namespace
