// cclCommRegister / cclCommDeregister and cclMemAlloc through the C API, ranks as threads of this
// process (over shm): bad arguments are refused, registered buffers give exact results, and a
// cclMemAlloc buffer is registered once per communicator however many calls use it (each call
// resolves it through the communicator's cache, core/call/call_memory.h). Every wait is bounded.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../support/c_rank_threads.h"
#include "ccl/ccl.h"
#include "core/api/api_guard.h"
#include "core/comm/comm.h"

namespace {

// The ranks as threads (c_rank_threads.h), each destroying its communicator after `body`.
void run_ranks(int nranks, const std::function<void(int, cclComm_t)>& body) {
  cclConfig_t config = CCL_CONFIG_INITIALIZER;
  config.timeoutMs = 30000;
  ccl_test::run_c_ranks(nranks, config, [&](int rank, cclComm_t comm) {
    body(rank, comm);
    EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
  });
}

TEST(RegistrationApi, BadArgumentsAreRefused) {
  run_ranks(1, [](int, cclComm_t comm) {
    std::vector<float> x(100);
    void* handle = nullptr;
    EXPECT_EQ(cclCommRegister(nullptr, x.data(), 400, &handle), cclInvalidArgument);
    EXPECT_EQ(cclCommRegister(comm, nullptr, 400, &handle), cclInvalidArgument);
    EXPECT_NE(std::string(cclGetLastError(comm)).find("buff is NULL"), std::string::npos);
    EXPECT_EQ(cclCommRegister(comm, x.data(), 0, &handle), cclInvalidArgument);
    EXPECT_EQ(cclCommRegister(comm, x.data(), 400, nullptr), cclInvalidArgument);
    EXPECT_EQ(cclCommDeregister(comm, nullptr), cclInvalidArgument);
    int not_a_handle = 0;
    EXPECT_EQ(cclCommDeregister(comm, &not_a_handle), cclInvalidArgument);
    EXPECT_NE(std::string(cclGetLastError(comm)).find("not a registration"), std::string::npos);
    ASSERT_EQ(cclCommRegister(comm, x.data(), 400, &handle), cclSuccess);
    ASSERT_NE(handle, nullptr);
    EXPECT_EQ(cclCommDeregister(comm, handle), cclSuccess);
    EXPECT_EQ(cclCommDeregister(comm, handle), cclInvalidArgument);  // twice
  });
}

TEST(RegistrationApi, RegisteredBuffersGiveExactResults) {
  constexpr int kRanks = 3;
  run_ranks(kRanks, [](int rank, cclComm_t comm) {
    std::vector<int32_t> in(100003, rank + 1), out(in.size(), -1);
    void* hin = nullptr;
    void* hout = nullptr;
    ASSERT_EQ(cclCommRegister(comm, in.data(), in.size() * 4, &hin), cclSuccess);
    ASSERT_EQ(cclCommRegister(comm, out.data(), out.size() * 4, &hout), cclSuccess);
    ASSERT_EQ(cclAllReduce(in.data(), out.data(), in.size(), cclInt32, cclSum, comm, nullptr),
              cclSuccess);
    EXPECT_EQ(out, std::vector<int32_t>(in.size(), kRanks * (kRanks + 1) / 2));
    std::vector<int32_t> peer(1000, -1);
    const int to = (rank + 1) % kRanks, from = (rank + kRanks - 1) % kRanks;
    ASSERT_EQ(cclGroupStart(), cclSuccess);
    EXPECT_EQ(cclSend(in.data(), peer.size(), cclInt32, to, comm, nullptr), cclSuccess);
    EXPECT_EQ(cclRecv(peer.data(), peer.size(), cclInt32, from, comm, nullptr), cclSuccess);
    ASSERT_EQ(cclGroupEnd(), cclSuccess);
    EXPECT_EQ(peer, std::vector<int32_t>(peer.size(), from + 1));
    EXPECT_EQ(cclCommDeregister(comm, hin), cclSuccess);
    EXPECT_EQ(cclCommDeregister(comm, hout), cclSuccess);
  });
}

TEST(RegistrationApi, AMemAllocBufferIsRegisteredOncePerCommunicator) {
  constexpr int kRanks = 2;
  constexpr size_t kBytes = 1 << 20;  // above the registered broadcast's threshold
  run_ranks(kRanks, [](int rank, cclComm_t comm) {
    void* mem = nullptr;
    ASSERT_EQ(cclMemAlloc(&mem, kBytes), cclSuccess);
    auto* bytes = static_cast<uint8_t*>(mem);
    for (int i = 0; i < 5; ++i) {
      const int root = i % kRanks;
      for (size_t b = 0; b < kBytes; ++b) bytes[b] = static_cast<uint8_t>(b * 3 + rank + i);
      ASSERT_EQ(cclBroadcast(mem, mem, kBytes, cclUint8, root, comm, nullptr), cclSuccess);
      for (size_t b = 0; b < kBytes; b += 4093) {
        ASSERT_EQ(bytes[b], static_cast<uint8_t>(b * 3 + root + i)) << "byte " << b;
      }
    }
    ccl::RegistrationCache& cache = ccl::impl_of(comm)->registrations();
    EXPECT_EQ(cache.registrations_made(), 1u);
    EXPECT_EQ(cache.size(), 1u);
    // With the shm transport's key: the memfd the peers' windows map.
    const ccl::transport::RegisteredRegion* region = cache.find(mem, 1);
    ASSERT_NE(region, nullptr);
    EXPECT_EQ(region->kind, ccl::MemoryKind::RegisteredHost);
    EXPECT_NE(region->key_of("shm"), nullptr);
    EXPECT_EQ(cclMemFree(mem), cclSuccess);
  });
}

}  // namespace
