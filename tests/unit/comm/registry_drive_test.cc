// The algorithm registry drives every collective: for each entry of the registry, CCL_ALGO names
// it alone, three ranks (threads of this process, over shared memory) make a communicator whose
// tuner then chooses that very entry, and the collective run through the C API gives the exact
// result. Entries a single host cannot run (hierarchical) must fall back instead.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "core/comm/comm.h"
#include "core/tuning/registry.h"

namespace ccl {
namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 600;  // int32: 2400 B, inside the 1 MiB window

// The call of `collective` with `count` elements per the tuner's convention, checked exactly.
void run_and_check(tune::Collective collective, int rank, cclComm_t comm) {
  std::vector<int> in(kCount * kRanks), out(kCount * kRanks, -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = rank + 1 + static_cast<int>(i % 7);
  const int sum_of_ranks = kRanks * (kRanks + 1) / 2;
  auto expect = [&](size_t i, int want) {
    ASSERT_EQ(out[i], want) << tune::collective_name(collective) << " element " << i;
  };
  switch (collective) {
    case tune::Collective::AllReduce:
      ASSERT_EQ(cclAllReduce(in.data(), out.data(), kCount, cclInt32, cclSum, comm, nullptr),
                cclSuccess);
      for (size_t i = 0; i < kCount; ++i) expect(i, sum_of_ranks + kRanks * (i % 7));
      break;
    case tune::Collective::Broadcast:
      ASSERT_EQ(cclBroadcast(in.data(), out.data(), kCount, cclInt32, 1, comm, nullptr),
                cclSuccess);
      for (size_t i = 0; i < kCount; ++i) expect(i, 2 + static_cast<int>(i % 7));
      break;
    case tune::Collective::Reduce:
      ASSERT_EQ(cclReduce(in.data(), out.data(), kCount, cclInt32, cclSum, 2, comm, nullptr),
                cclSuccess);
      if (rank == 2) {
        for (size_t i = 0; i < kCount; ++i) expect(i, sum_of_ranks + kRanks * (i % 7));
      }
      break;
    case tune::Collective::AllGather:
      ASSERT_EQ(cclAllGather(in.data(), out.data(), kCount, cclInt32, comm, nullptr), cclSuccess);
      for (size_t i = 0; i < kCount * kRanks; ++i) {
        expect(i, static_cast<int>(i / kCount) + 1 + static_cast<int>(i % kCount % 7));
      }
      break;
    case tune::Collective::ReduceScatter:
      ASSERT_EQ(cclReduceScatter(in.data(), out.data(), kCount, cclInt32, cclSum, comm, nullptr),
                cclSuccess);
      for (size_t i = 0; i < kCount; ++i) {
        expect(i, sum_of_ranks + kRanks * static_cast<int>((rank * kCount + i) % 7));
      }
      break;
    case tune::Collective::AlltoAll:
      ASSERT_EQ(cclAlltoAll(in.data(), out.data(), kCount, cclInt32, comm, nullptr), cclSuccess);
      // Block q of the output is block `rank` of rank q's input.
      for (size_t i = 0; i < kCount * kRanks; ++i) {
        const size_t q = i / kCount, at = rank * kCount + i % kCount;
        expect(i, static_cast<int>(q) + 1 + static_cast<int>(at % 7));
      }
      break;
    case tune::Collective::Barrier:
      ASSERT_EQ(cclBarrier(comm, nullptr), cclSuccess);
      break;
  }
}

size_t tuner_bytes(tune::Collective collective) {
  return collective == tune::Collective::Barrier ? 0 : kCount * sizeof(int);
}

class ScopedAlgo {
 public:
  explicit ScopedAlgo(const std::string& value) { setenv("CCL_ALGO", value.c_str(), 1); }
  ~ScopedAlgo() { unsetenv("CCL_ALGO"); }
};

TEST(RegistryDrivesEveryCollective, EachEntryForcedRunsAndIsChosen) {
  int checked = 0;
  for (const tune::AlgorithmEntry* entry : tune::registry()) {
    const std::string algo = std::string(tune::collective_name(entry->collective)) + ":" +
                             tune::algorithm_name(entry->algorithm);
    SCOPED_TRACE(algo);
    const ScopedAlgo scoped(algo);
    cclUniqueId id;
    ASSERT_EQ(cclGetUniqueId(&id), cclSuccess);
    std::vector<std::thread> ranks;
    std::vector<int> chosen(kRanks, 0);
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        cclComm_t comm = nullptr;
        ASSERT_EQ(cclCommInitRank(&comm, kRanks, id, r), cclSuccess);
        const tune::Choice choice =
            comm->impl->tuner().choose(entry->collective, tuner_bytes(entry->collective));
        chosen[r] = choice.entry == entry && !choice.fallback;
        run_and_check(entry->collective, r, comm);
        EXPECT_EQ(cclCommDestroy(comm), cclSuccess);
      });
    }
    for (auto& t : ranks) t.join();
    // One host: everything but the hierarchical allreduce is available and must be chosen.
    const bool runnable = entry->algorithm != tune::Algorithm::Hierarchical;
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(chosen[r], runnable ? 1 : 0) << "rank " << r;
    checked += runnable;
  }
  EXPECT_GE(checked, 18);  // every collective, and each through more than one entry
}

}  // namespace
}  // namespace ccl
