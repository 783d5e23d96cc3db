// Communicators whose ranks are threads of this process, over the loopback transport: the whole
// path from Communicator through schedules, executor and reduction kernels, without processes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "base/error.h"
#include "calls.h"
#include "core/bootstrap/store.h"
#include "core/comm/comm.h"
#include "expected_values.h"
#include "loopback_ranks.h"
#include "transport/loopback/loopback_transport.h"

namespace ccl {
namespace {

using testing::run_ranks;

class LoopbackComm : public ::testing::TestWithParam<int> {};

TEST_P(LoopbackComm, AllReduceEveryTypeAndOp) {
  const int nranks = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(nranks, [&](Communicator& comm) {
    for (int t = 0; t < cclNumTypes; ++t) {
      auto type = static_cast<cclDataType_t>(t);
      size_t size = reduce::datatype_size(type);
      for (int o = 0; o < cclNumOps; ++o) {
        auto op = static_cast<cclRedOp_t>(o);
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
          for (bool in_place : {false, true}) {
            std::vector<uint8_t> in(count * size + 1), out(count * size + 1),
                want(count * size + 1);
            for (size_t i = 0; i < count; ++i) {
              testing::store_value(type, in.data(), i, testing::input_value(op, comm.rank(), i));
              testing::store_expected(type, op, nranks, want.data(), i);
            }
            uint8_t* dst = in_place ? in.data() : out.data();
            test::all_reduce(comm, in.data(), dst, count, type, op);
            if (memcmp(dst, want.data(), count * size) != 0) ++wrong;
          }
        }
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(LoopbackComm, AllReduceLargeOddCount) {
  const int nranks = GetParam();
  const size_t count = 1000003;
  std::atomic<int> wrong{0};
  run_ranks(nranks, [&](Communicator& comm) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i)
      data[i] = static_cast<float>(testing::input_value(cclSum, comm.rank(), i));
    test::all_reduce(comm, data.data(), data.data(), count, cclFloat32, cclSum);
    for (size_t i = 0; i < count; ++i) {
      if (data[i] != static_cast<float>(testing::reduce_values(cclSum, nranks, i))) {
        ++wrong;
        break;
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(LoopbackComm, BroadcastFromEveryRoot) {
  const int nranks = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(nranks, [&](Communicator& comm) {
    for (int root = 0; root < nranks; ++root) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{300001}}) {
        std::vector<int32_t> want(count), out(count, -1);
        for (size_t i = 0; i < count; ++i) want[i] = static_cast<int32_t>(i * 31 + root);
        const void* in = comm.rank() == root ? want.data() : nullptr;
        test::broadcast(comm, in, out.data(), count, cclInt32, root);
        if (out != want) ++wrong;
      }
    }
    test::barrier(comm);
  });
  EXPECT_EQ(wrong.load(), 0);
}

// Each allreduce algorithm forced by CCL_ALGO, with folded ranks, chunking and in place.
TEST_P(LoopbackComm, AllReduceByEveryForcedAlgorithm) {
  const int nranks = GetParam();
  for (const char* algo : {"ring", "tree", "recursive_doubling", "rabenseifner"}) {
    SCOPED_TRACE(algo);
    setenv("CCL_ALGO", algo, 1);
    setenv("CCL_CHUNKSIZE", "4K", 1);
    std::atomic<int> wrong{0};
    run_ranks(nranks, [&](Communicator& comm) {
      for (cclRedOp_t op : {cclSum, cclAvg, cclMax}) {
        for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{100003}}) {
          for (bool in_place : {false, true}) {
            std::vector<uint16_t> in(count), out(count), want(count);
            for (size_t i = 0; i < count; ++i) {
              testing::store_value(cclBfloat16, in.data(), i,
                                   testing::input_value(op, comm.rank(), i));
              testing::store_expected(cclBfloat16, op, nranks, want.data(), i);
            }
            uint16_t* dst = in_place ? in.data() : out.data();
            test::all_reduce(comm, in.data(), dst, count, cclBfloat16, op);
            if (memcmp(dst, want.data(), count * sizeof(uint16_t)) != 0) ++wrong;
          }
        }
      }
    });
    unsetenv("CCL_ALGO");
    unsetenv("CCL_CHUNKSIZE");
    EXPECT_EQ(wrong.load(), 0);
  }
}

// Broadcast and reduce through a forced tree and a forced chain, from every root, chunked.
TEST_P(LoopbackComm, BroadcastAndReduceByForcedTreeAndChain) {
  const int nranks = GetParam();
  for (const char* algo : {"tree", "ring"}) {
    SCOPED_TRACE(algo);
    setenv("CCL_ALGO", algo, 1);
    setenv("CCL_CHUNKSIZE", "4K", 1);
    std::atomic<int> wrong{0};
    run_ranks(nranks, [&](Communicator& comm) {
      for (int root = 0; root < nranks; ++root) {
        for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{30001}}) {
          std::vector<int32_t> want(count), out(count, -1);
          for (size_t i = 0; i < count; ++i) want[i] = static_cast<int32_t>(i * 31 + root);
          const void* in = comm.rank() == root ? want.data() : nullptr;
          test::broadcast(comm, in, out.data(), count, cclInt32, root);
          if (out != want) ++wrong;
          // Reduce: rank r contributes i + r, so the root gets n*i + n(n-1)/2.
          std::vector<int32_t> mine(count), sum(count, -1);
          for (size_t i = 0; i < count; ++i) mine[i] = static_cast<int32_t>(i + comm.rank());
          const bool is_root = comm.rank() == root;
          test::reduce(comm, mine.data(), is_root ? sum.data() : nullptr, count, cclInt32, cclSum,
                       root);
          for (size_t i = 0; is_root && i < count; ++i) {
            if (sum[i] != static_cast<int32_t>(nranks * i + nranks * (nranks - 1) / 2)) {
              ++wrong;
              break;
            }
          }
        }
      }
    });
    unsetenv("CCL_ALGO");
    unsetenv("CCL_CHUNKSIZE");
    EXPECT_EQ(wrong.load(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, LoopbackComm, ::testing::Values(1, 2, 3, 4, 5, 7, 8));

// Two loopback communicators; rank 0 gets `timeout0`.
struct Pair {
  InMemoryStore store;
  std::shared_ptr<Communicator> comms[2];
  explicit Pair(std::chrono::milliseconds timeout0) {
    auto fabric = std::make_shared<transport::LoopbackFabric>(2);
    auto options = [&](int rank) {
      CommOptions o;
      o.rank = rank;
      o.nranks = 2;
      o.loopback = fabric;
      if (rank == 0) o.timeout = timeout0;
      return o;
    };
    // A failed init (rank 0's short timeout under a loaded sanitizer run) must fail the test,
    // not terminate it: both ranks' errors are caught and the thread is always joined.
    std::exception_ptr failed1;
    std::thread joiner([&] {
      try {
        comms[1] = Communicator::create(options(1), store);
      } catch (...) {
        failed1 = std::current_exception();
      }
    });
    std::exception_ptr failed0;
    try {
      comms[0] = Communicator::create(options(0), store);
    } catch (...) {
      failed0 = std::current_exception();
    }
    joiner.join();
    if (failed0) std::rethrow_exception(failed0);
    if (failed1) std::rethrow_exception(failed1);
  }
};

TEST(LoopbackCommErrors, AbortReleasesWaitingRank) {
  // Rank 0 enters an allreduce that rank 1 never joins; aborting rank 0 must release it.
  Pair pair(std::chrono::milliseconds(60000));
  auto& comms = pair.comms;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    comms[0]->abort();
  });
  std::vector<float> x(16, 1.0f);
  auto start = Clock::now();
  try {
    test::all_reduce(*comms[0], x.data(), x.data(), x.size(), cclFloat32, cclSum);
    ADD_FAILURE() << "allreduce without a peer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclRemoteError) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  aborter.join();
}

TEST(LoopbackCommErrors, TimeoutNamesThePeer) {
  // Long enough for init (with its tuning collectives) under TSan on a loaded machine.
  Pair pair(std::chrono::milliseconds(3000));
  auto& comms = pair.comms;
  std::vector<float> x(16, 1.0f);
  try {
    test::all_reduce(*comms[0], x.data(), x.data(), x.size(), cclFloat32, cclSum);
    ADD_FAILURE() << "allreduce without a peer succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout);
    EXPECT_NE(std::string(e.what()).find("waiting for rank 1"), std::string::npos) << e.what();
  }
  // A failed communicator refuses further work with the same code.
  try {
    test::barrier(*comms[0]);
    ADD_FAILURE() << "barrier on a failed communicator succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout);
  }
}

}  // namespace
}  // namespace ccl
