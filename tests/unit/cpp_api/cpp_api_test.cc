// The C++ API (ccl.hpp): lifecycle, errors, datatype deduction, size checks, all-reduce,
// broadcast, barrier and streams, for 1..4 ranks run as threads.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../support/rank_threads.h"
#include "ccl/ccl.hpp"

namespace {

using ccl_test::run_ranks;

// Datatype deduction, at compile time.
static_assert(ccl::datatype_of<int8_t> == cclInt8);
static_assert(ccl::datatype_of<char> == cclInt8);
static_assert(ccl::datatype_of<uint8_t> == cclUint8);
static_assert(ccl::datatype_of<int32_t> == cclInt32);
static_assert(ccl::datatype_of<uint32_t> == cclUint32);
static_assert(ccl::datatype_of<int64_t> == cclInt64);
static_assert(ccl::datatype_of<uint64_t> == cclUint64);
static_assert(ccl::datatype_of<long long> == cclInt64);
static_assert(ccl::datatype_of<unsigned long long> == cclUint64);
static_assert(ccl::datatype_of<float> == cclFloat32);
static_assert(ccl::datatype_of<const float> == cclFloat32);
static_assert(ccl::datatype_of<double> == cclFloat64);
static_assert(ccl::datatype_of<ccl::half> == cclFloat16);
static_assert(ccl::datatype_of<ccl::bfloat16> == cclBfloat16);
static_assert(ccl::datatype_of<ccl::fp8_e4m3> == cclFloat8e4m3);
static_assert(ccl::datatype_of<ccl::fp8_e5m2> == cclFloat8e5m2);
static_assert(!ccl::is_supported_type_v<bool>);
static_assert(!ccl::is_supported_type_v<short>);
static_assert(!ccl::is_supported_type_v<long double>);
static_assert(!ccl::is_supported_type_v<void*>);
static_assert(!ccl::is_supported_type_v<std::string>);
static_assert(sizeof(ccl::half) == 2 && std::is_trivially_copyable_v<ccl::half>);
static_assert(sizeof(ccl::bfloat16) == 2 && std::is_trivially_copyable_v<ccl::bfloat16>);
static_assert(sizeof(ccl::fp8_e4m3) == 1 && std::is_trivially_copyable_v<ccl::fp8_e4m3>);
static_assert(sizeof(ccl::fp8_e5m2) == 1 && std::is_trivially_copyable_v<ccl::fp8_e5m2>);

// Handles are move-only; moves never throw; a Group is a scope.
template <class T>
constexpr bool move_only =
    !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
    std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;
static_assert(move_only<ccl::Communicator> && move_only<ccl::Stream> && move_only<ccl::RedOp>);
static_assert(!std::is_copy_constructible_v<ccl::Group> &&
              !std::is_move_constructible_v<ccl::Group>);
static_assert(std::is_nothrow_destructible_v<ccl::Communicator>);
static_assert(std::is_convertible_v<ccl::Stream&, ccl::StreamRef>);
static_assert(std::is_convertible_v<ccl::Stream*, ccl::StreamRef>);
static_assert(std::is_convertible_v<std::nullptr_t, ccl::StreamRef>);

// Which buffers an in-place all-reduce accepts: writable ranges that outlive the call.
template <class B>
concept in_place_reducible = requires(ccl::Communicator& c, B&& b) {
  c.all_reduce(std::forward<B>(b));
};
static_assert(in_place_reducible<std::vector<float>&>);
static_assert(in_place_reducible<std::span<float>>);
static_assert(in_place_reducible<float (&)[4]>);
static_assert(!in_place_reducible<const std::vector<float>&>);  // read-only
static_assert(!in_place_reducible<std::span<const float>>);     // read-only
static_assert(!in_place_reducible<std::vector<float>>);         // a temporary

// Throws what `f` throws as a ccl::Error, or fails.
template <class F>
ccl::Error error_of(F f) {
  try {
    f();
  } catch (const ccl::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no ccl::Error thrown";
  return ccl::Error(cclSuccess, "");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CppApi, VersionIsTheHeaders) { EXPECT_EQ(ccl::version(), CCL_VERSION_CODE); }

TEST(CppApi, ErrorCarriesCodeFunctionAndDetail) {
  ccl::UniqueId unused{};
  ccl::Error e = error_of([&] { ccl::Communicator::init_rank(0, unused, 0); });
  EXPECT_EQ(e.code(), cclInvalidArgument);
  EXPECT_TRUE(contains(e.what(), "cclCommInitRank")) << e.what();
  EXPECT_TRUE(contains(e.what(), cclGetErrorString(cclInvalidArgument))) << e.what();
  EXPECT_TRUE(contains(e.what(), "nranks 0")) << e.what();

  e = error_of([&] { ccl::Communicator::init_rank(2, unused, 5, ccl_test::test_config()); });
  EXPECT_EQ(e.code(), cclInvalidArgument);
  EXPECT_TRUE(contains(e.what(), "rank 5")) << e.what();

  e = error_of([&] {
    ccl::Communicator::init_rank(1, unused, 0, ccl::Config{.timeout = std::chrono::seconds(0)});
  });
  EXPECT_EQ(e.code(), cclInvalidArgument);
  EXPECT_TRUE(contains(e.what(), "timeout")) << e.what();
}

TEST(CppApi, EmptyHandlesThrowInsteadOfCrashing) {
  ccl::Communicator comm;
  EXPECT_FALSE(comm);
  EXPECT_EQ(comm.get(), nullptr);
  ccl::Error e = error_of([&] { (void)comm.rank(); });
  EXPECT_EQ(e.code(), cclInvalidArgument);
  EXPECT_TRUE(contains(e.what(), "cclCommUserRank")) << e.what();
  std::vector<float> x(4);
  EXPECT_EQ(error_of([&] { comm.all_reduce(x); }).code(), cclInvalidArgument);
  EXPECT_NO_THROW(comm.abort());  // nothing to abort

  ccl::Stream stream;
  ASSERT_TRUE(stream);
  ccl::Stream moved = std::move(stream);
  EXPECT_FALSE(stream);  // NOLINT(bugprone-use-after-move): the moved-from state is under test
  EXPECT_TRUE(moved.query());
  EXPECT_NO_THROW(moved.synchronize());
  EXPECT_EQ(error_of([&] { stream.synchronize(); }).code(), cclInvalidArgument);

  ccl::RedOp op;
  EXPECT_FALSE(op);
  EXPECT_NE(static_cast<cclRedOp_t>(op), cclSum);  // an empty op is no valid op
}

class CppApiRanks : public testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Ranks, CppApiRanks, testing::Values(1, 2, 3, 4), ccl_test::ranks_name);

// Sums rank+1 over the ranks for element type T (exact in every type for <= 4 ranks).
template <class T>
void check_sum(ccl::Communicator& comm, const std::vector<T>& one_per_rank,
               const std::vector<T>& expected_by_nranks) {
  const int n = comm.size();
  const T mine = one_per_rank[static_cast<size_t>(comm.rank())];
  const T want = expected_by_nranks[static_cast<size_t>(n - 1)];
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    std::vector<T> send(count, mine), recv(count);
    comm.all_reduce(send, recv);
    for (size_t i = 0; i < count; ++i) ASSERT_TRUE(recv[i] == want) << "element " << i;
    comm.all_reduce(std::span<T>(send));  // in place
    for (size_t i = 0; i < count; ++i) ASSERT_TRUE(send[i] == want) << "element " << i;
  }
}

TEST_P(CppApiRanks, AllReduceDeducesEveryDatatype) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    check_sum<float>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    check_sum<double>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    check_sum<int8_t>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    check_sum<char>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    check_sum<uint8_t>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    check_sum<int32_t>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    check_sum<uint32_t>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    check_sum<int64_t>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    check_sum<uint64_t>(comm, {1, 2, 3, 4}, {1, 3, 6, 10});
    // 1.0 on every rank sums to nranks: the bit patterns of 1, 2, 3 and 4.
    check_sum<ccl::half>(comm, {{0x3c00}, {0x3c00}, {0x3c00}, {0x3c00}},
                         {{0x3c00}, {0x4000}, {0x4200}, {0x4400}});
    check_sum<ccl::bfloat16>(comm, {{0x3f80}, {0x3f80}, {0x3f80}, {0x3f80}},
                             {{0x3f80}, {0x4000}, {0x4040}, {0x4080}});
    check_sum<ccl::fp8_e4m3>(comm, {{0x38}, {0x38}, {0x38}, {0x38}},
                             {{0x38}, {0x40}, {0x44}, {0x48}});
    check_sum<ccl::fp8_e5m2>(comm, {{0x3c}, {0x3c}, {0x3c}, {0x3c}},
                             {{0x3c}, {0x40}, {0x42}, {0x44}});
  });
}

TEST_P(CppApiRanks, AllReduceOps) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size();
    const int32_t mine = comm.rank() + 1;
    std::array<int32_t, 5> send{mine, mine, mine, mine, mine}, recv{};
    int32_t factorial = 1;
    for (int i = 2; i <= n; ++i) factorial *= i;
    comm.all_reduce(send, recv, cclMax);
    EXPECT_EQ(recv[4], n);
    comm.all_reduce(send, recv, cclMin);
    EXPECT_EQ(recv[4], 1);
    comm.all_reduce(send, recv, cclProd);
    EXPECT_EQ(recv[4], factorial);
    float x[3] = {float(mine), float(mine), float(mine)};
    comm.all_reduce(x, cclAvg);  // a C array, in place
    EXPECT_EQ(x[2], float(n + 1) / 2.0f);
  });
}

TEST_P(CppApiRanks, BroadcastFromEveryRoot) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    for (int root = 0; root < n; ++root) {
      std::vector<int64_t> send, recv(33, -1);
      if (me == root) send.assign(33, int64_t{1000} + root);  // non-roots send nothing
      comm.broadcast(send, recv, root);
      EXPECT_EQ(recv, std::vector<int64_t>(33, 1000 + root)) << "root " << root;

      std::vector<double> data(17, me == root ? 0.5 + root : -1.0);
      comm.broadcast(data, root);  // in place
      EXPECT_EQ(data, std::vector<double>(17, 0.5 + root)) << "root " << root;
    }
  });
}

TEST_P(CppApiRanks, BarrierWaitsForEveryRank) {
  std::atomic<int> arrived{0};
  run_ranks(GetParam(), [&](ccl::Communicator& comm) {
    for (int round = 1; round <= 3; ++round) {
      arrived.fetch_add(1);
      comm.barrier();
      EXPECT_GE(arrived.load(), round * comm.size()) << "round " << round;
      comm.barrier();  // nobody starts the next round before all checked this one
    }
  });
}

TEST_P(CppApiRanks, StreamQueuesInOrder) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    ccl::Stream stream;
    std::vector<float> a(100, float(me + 1)), b(100);
    std::vector<int32_t> c(10, me == 0 ? 42 : 0);
    comm.all_reduce(a, b, cclSum, stream);  // by reference
    comm.all_reduce(b, cclMax, &stream);    // by pointer, after the first
    comm.broadcast(c, 0, stream);
    comm.barrier(stream);
    stream.synchronize();
    EXPECT_TRUE(stream.query());
    EXPECT_EQ(b, std::vector<float>(100, float(n * (n + 1) / 2)));
    EXPECT_EQ(c, std::vector<int32_t>(10, 42));
  });
}

TEST_P(CppApiRanks, BadRootThrowsInvalidArgumentAndTheCommunicatorStillWorks) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size();
    std::vector<float> x(8, 1.0f);
    for (int root : {n, -1}) {
      ccl::Error e = error_of([&] { comm.broadcast(x, root); });
      EXPECT_EQ(e.code(), cclInvalidArgument);
      EXPECT_TRUE(contains(e.what(), "cclBroadcast")) << e.what();
      EXPECT_TRUE(contains(e.what(), "root " + std::to_string(root))) << e.what();
      EXPECT_TRUE(contains(comm.last_error(), "root")) << comm.last_error();
    }
    comm.all_reduce(x);
    EXPECT_EQ(x, std::vector<float>(8, float(n)));
  });
}

TEST_P(CppApiRanks, SizesAreCheckedBeforeTheCall) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const size_t n = static_cast<size_t>(comm.size());
    const size_t me = static_cast<size_t>(comm.rank());
    std::vector<int32_t> four(4), five(5);
    auto expect_invalid = [](auto call, const char* function, const char* argument) {
      ccl::Error e = error_of(call);
      EXPECT_EQ(e.code(), cclInvalidArgument) << e.what();
      EXPECT_TRUE(contains(e.what(), function)) << e.what();
      EXPECT_TRUE(contains(e.what(), argument)) << e.what();
    };
    expect_invalid([&] { comm.all_reduce(four, five); }, "all_reduce", "recv.size() 5");
    std::vector<int32_t> gathered(n * 4 + 1);
    expect_invalid([&] { comm.all_gather(four, gathered); }, "all_gather", "recv.size()");
    expect_invalid([&] { comm.reduce_scatter(gathered, four); }, "reduce_scatter", "send.size()");
    expect_invalid([&] { comm.all_to_all(four, five); }, "all_to_all", "recv.size() 5");
    if (me == 0) {  // only the root's send must match
      expect_invalid([&] { comm.broadcast(four, five, 0); }, "broadcast", "send.size() 4");
    }
    std::vector<size_t> counts(n, 4), displs(n, 0), short_list(n + 1, 0);
    expect_invalid([&] { comm.all_gather_v(four, four, counts, short_list); }, "all_gather_v",
                   "displs.size()");
    displs[n - 1] = 1;  // block n-1 would end past the 4 elements of recv
    expect_invalid([&] { comm.all_gather_v(four, four, counts, displs); }, "all_gather_v",
                   "exceeds recv.size() 4");
    counts[me] = 3;
    displs.assign(n, 0);
    expect_invalid([&] { comm.all_gather_v(four, four, counts, displs); }, "all_gather_v",
                   "recv_counts[rank()] 3");
    counts.assign(n, 4);
    counts[0] = 6;
    expect_invalid([&] { comm.all_to_all_v(five, counts, displs, five, counts, displs); },
                   "all_to_all_v", "exceeds send.size() 5");
    comm.barrier();  // nothing above reached the peers: they are still in step
  });
}

// Polls async_error() while a non-blocking communicator's work is in progress (bounded).
cclResult_t settle(const ccl::Communicator& comm) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  cclResult_t state = comm.async_error();
  while (state == cclInProgress && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    state = comm.async_error();
  }
  return state;
}

// With Config::blocking = false, init, operations and split return at once (they do not throw
// cclInProgress) and async_error() says when they are done.
TEST_P(CppApiRanks, NonBlockingCallsReturnAtOnce) {
  ccl::Config config = ccl_test::test_config();
  config.blocking = false;
  run_ranks(
      GetParam(),
      [](ccl::Communicator& comm) {
        ASSERT_EQ(settle(comm), cclSuccess) << comm.last_error();
        const int n = comm.size(), me = comm.rank();
        std::vector<int32_t> x(100, 1);
        comm.all_reduce(x);
        ASSERT_EQ(settle(comm), cclSuccess) << comm.last_error();
        EXPECT_EQ(x, std::vector<int32_t>(100, n));
        std::optional<ccl::Communicator> half = comm.split(me % 2, me);  // non-blocking too
        ASSERT_TRUE(half);
        ASSERT_EQ(settle(*half), cclSuccess) << half->last_error();
        std::vector<int32_t> y(10, me);
        half->all_reduce(y);
        ASSERT_EQ(settle(*half), cclSuccess) << half->last_error();
        int want = 0;
        for (int r = me % 2; r < n; r += 2) want += r;
        EXPECT_EQ(y, std::vector<int32_t>(10, want));
      },
      config);
}

TEST_P(CppApiRanks, RegisteredBuffersAndTheirScope) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size();
    std::vector<int32_t> x(5000, 1);
    {
      ccl::Registration reg = comm.register_buffer(std::span(x));
      EXPECT_TRUE(reg);
      ccl::Registration moved = std::move(reg);
      EXPECT_FALSE(reg);  // NOLINT(bugprone-use-after-move): the moved-from state is under test
      comm.all_reduce(x);
      EXPECT_EQ(x, std::vector<int32_t>(x.size(), n));
      void* handle = moved.handle();
      moved.reset();  // deregistered: the handle is no longer valid
      EXPECT_EQ(cclCommDeregister(comm.get(), handle), cclInvalidArgument);
    }
    EXPECT_THROW(comm.register_buffer(nullptr, 10), ccl::Error);
  });
}

TEST_P(CppApiRanks, MoveAndAbort) {
  run_ranks(GetParam(), [](ccl::Communicator& comm) {
    const int n = comm.size(), me = comm.rank();
    ccl::Communicator moved(std::move(comm));
    EXPECT_FALSE(comm);  // NOLINT(bugprone-use-after-move): the moved-from state is under test
    ASSERT_TRUE(moved);
    EXPECT_EQ(moved.rank(), me);
    EXPECT_EQ(moved.size(), n);

    ccl::Communicator assigned;
    assigned = std::move(moved);
    ccl::Communicator adopted(assigned.release());  // through the C handle and back
    EXPECT_FALSE(assigned);
    std::vector<int32_t> x(3, 1);
    adopted.all_reduce(x);
    EXPECT_EQ(x, std::vector<int32_t>(3, n));
    EXPECT_EQ(adopted.async_error(), cclSuccess);

    adopted.barrier();
    adopted.abort();  // on a healthy communicator: succeeds and frees it
    EXPECT_FALSE(adopted);
    EXPECT_NO_THROW(adopted.abort());
  });
}

}  // namespace
