// The whole collective set over loopback communicators (ranks as threads of this process), at
// 1..8 ranks: reduce, allgather(v), reducescatter, alltoall(v), send/recv groups, split and
// PreMulSum, through the Communicator with its schedules, executor and kernels.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/reduce/reduce.h"
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

// A value that identifies (rank, element) and fits every integer type used below.
int32_t tag(int rank, size_t i) { return static_cast<int32_t>(rank * 100000 + i % 99991); }

// True when block q of `out` (n blocks of `count`) holds expected(q, i) at element i.
template <typename Expected>
bool blocks_match(const int32_t* out, int n, size_t count, Expected expected) {
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < count; ++i) {
      if (out[q * count + i] != expected(q, i)) return false;
    }
  }
  return true;
}

const std::vector<size_t> kCounts = {0, 1, 7, 1000, 30001};

class CollectiveSet : public ::testing::TestWithParam<int> {};

TEST_P(CollectiveSet, ReduceEveryTypeOpAndRoot) {
  const int n = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    for (int t = 0; t < cclNumTypes; ++t) {
      const auto type = static_cast<cclDataType_t>(t);
      const size_t size = reduce::datatype_size(type);
      for (int o = 0; o < cclNumOps; ++o) {
        const auto op = static_cast<cclRedOp_t>(o);
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
          for (int root = 0; root < n; ++root) {
            const bool in_place = (root + t + o) % 2 == 1;
            std::vector<uint8_t> in(count * size + 1), out(count * size + 1),
                want(count * size + 1);
            for (size_t i = 0; i < count; ++i) {
              testing::store_value(type, in.data(), i, testing::input_value(op, comm.rank(), i));
              testing::store_expected(type, op, n, want.data(), i);
            }
            const bool is_root = comm.rank() == root;
            void* dst = is_root ? (in_place ? in.data() : out.data()) : nullptr;
            test::reduce(comm, in.data(), dst, count, type, op, root);
            if (is_root && memcmp(dst, want.data(), count * size) != 0) ++wrong;
          }
        }
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(CollectiveSet, ReduceScatterEveryTypeAndOp) {
  const int n = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    for (int t = 0; t < cclNumTypes; ++t) {
      const auto type = static_cast<cclDataType_t>(t);
      const size_t size = reduce::datatype_size(type);
      for (int o = 0; o < cclNumOps; ++o) {
        const auto op = static_cast<cclRedOp_t>(o);
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{333}}) {
          for (bool in_place : {false, true}) {
            const size_t total = count * n;
            std::vector<uint8_t> in(total * size + 1), out(count * size + 1),
                want(total * size + 1);
            for (size_t i = 0; i < total; ++i) {
              testing::store_value(type, in.data(), i, testing::input_value(op, comm.rank(), i));
              testing::store_expected(type, op, n, want.data(), i);
            }
            uint8_t* dst = in_place ? in.data() + comm.rank() * count * size : out.data();
            test::reduce_scatter(comm, in.data(), dst, count, type, op);
            if (memcmp(dst, want.data() + comm.rank() * count * size, count * size) != 0) ++wrong;
          }
        }
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(CollectiveSet, AllGatherInAndOutOfPlace) {
  const int n = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    for (size_t count : kCounts) {
      for (bool in_place : {false, true}) {
        std::vector<int32_t> mine(count), out(count * n, -1);
        for (size_t i = 0; i < count; ++i) mine[i] = tag(comm.rank(), i);
        const int32_t* send = mine.data();
        if (in_place) {
          std::copy(mine.begin(), mine.end(), out.begin() + comm.rank() * count);
          send = out.data() + comm.rank() * count;
        }
        test::all_gather(comm, send, out.data(), count, cclInt32);
        if (!blocks_match(out.data(), n, count, tag)) ++wrong;
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(CollectiveSet, AllGatherVUnevenWithGaps) {
  const int n = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    // Rank q sends 3q + 1 elements (rank 1 none when n > 2), placed in reverse rank order with a
    // gap of 5 elements between pieces.
    std::vector<size_t> counts(n), displs(n);
    size_t at = 0;
    for (int q = n - 1; q >= 0; --q) {
      counts[q] = (n > 2 && q == 1) ? 0 : 3 * q + 1;
      displs[q] = at;
      at += counts[q] + 5;
    }
    std::vector<int16_t> mine(counts[comm.rank()]), out(at, -1);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<int16_t>(tag(comm.rank(), i));
    test::all_gather_v(comm, mine.data(), out.data(), counts, displs, cclFloat16);
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < counts[q]; ++i) {
        if (out[displs[q] + i] != static_cast<int16_t>(tag(q, i))) ++wrong;
      }
      for (size_t i = displs[q] + counts[q]; i < displs[q] + counts[q] + 5; ++i) {
        if (out[i] != -1) ++wrong;  // the gaps are not written
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(CollectiveSet, AlltoAllInAndOutOfPlace) {
  const int n = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    for (size_t count : kCounts) {
      for (bool in_place : {false, true}) {
        // Block p of rank r's input, element i: tag(r * 16 + p, i).
        std::vector<int32_t> in(count * n), out(count * n, -1);
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < count; ++i) in[p * count + i] = tag(comm.rank() * 16 + p, i);
        }
        int32_t* dst = in_place ? in.data() : out.data();
        test::all_to_all(comm, in.data(), dst, count, cclInt32);
        const auto sent_to_me = [&](int q, size_t i) { return tag(q * 16 + comm.rank(), i); };
        if (!blocks_match(dst, n, count, sent_to_me)) ++wrong;
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(CollectiveSet, AlltoAllVUneven) {
  const int n = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    // Rank r sends (r + 2p) % 5 elements to rank p (some zero), blocks packed in reverse order.
    auto amount = [](int from, int to) { return static_cast<size_t>((from + 2 * to) % 5); };
    const int r = comm.rank();
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t sat = 0, rat = 0;
    for (int p = n - 1; p >= 0; --p) {
      sc[p] = amount(r, p), sd[p] = sat, sat += sc[p];
      rc[p] = amount(p, r), rd[p] = rat, rat += rc[p] + 1;
    }
    std::vector<uint64_t> in(sat), out(rat, 0);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < sc[p]; ++i) in[sd[p] + i] = tag(r * 16 + p, i);
    }
    test::all_to_all_v(comm, in.data(), sc, sd, out.data(), rc, rd, cclUint64);
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < rc[q]; ++i) {
        if (out[rd[q] + i] != static_cast<uint64_t>(tag(q * 16 + r, i))) ++wrong;
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(CollectiveSet, SendRecvRingSelfAndOrder) {
  const int n = GetParam();
  // With one rank, next and previous are the rank itself, and the self messages would pair up in
  // another order: covered by the self message of the larger rings.
  if (n == 1) GTEST_SKIP() << "needs a ring of at least two ranks";
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
    // Two messages to next (matched in posted order), receives posted before sends on odd
    // ranks, and one message to self.
    std::vector<int32_t> a(1001), b(7), self(13), got_a(1001, -1), got_b(7, -1), got_self(13, -1);
    for (size_t i = 0; i < a.size(); ++i) a[i] = tag(r, i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = tag(r + 50, i);
    for (size_t i = 0; i < self.size(); ++i) self[i] = tag(r + 70, i);
    std::vector<algo::PointToPoint> ops;
    std::vector<std::byte*> buffers;
    auto add = [&](bool send, int peer, std::vector<int32_t>& v) {
      ops.push_back({send, peer, v.size() * sizeof(int32_t)});
      buffers.push_back(reinterpret_cast<std::byte*>(v.data()));
    };
    if (r % 2 == 1) {
      add(false, prev, got_a), add(false, prev, got_b);
    }
    add(true, next, a), add(false, r, got_self), add(true, next, b), add(true, r, self);
    if (r % 2 == 0) {
      add(false, prev, got_a), add(false, prev, got_b);
    }
    test::point_to_point(comm, ops, buffers);
    for (size_t i = 0; i < a.size(); ++i) wrong += got_a[i] != tag(prev, i);
    for (size_t i = 0; i < b.size(); ++i) wrong += got_b[i] != tag(prev + 50, i);
    if (got_self != self) ++wrong;
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(CollectiveSet, UnmatchedSelfSendIsAnError) {
  run_ranks(GetParam(), [&](Communicator& comm) {
    int32_t v = 1;
    std::vector<algo::PointToPoint> ops = {{true, comm.rank(), sizeof(v)}};
    std::vector<std::byte*> buffers = {reinterpret_cast<std::byte*>(&v)};
    try {
      test::point_to_point(comm, ops, buffers);
      ADD_FAILURE() << "a send to self without a receive succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidUsage);
    }
  });
}

TEST_P(CollectiveSet, SplitSideBySideWithParent) {
  const int n = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    const int color = n > 2 && r == n - 1 ? CCL_SPLIT_NOCOLOR : r % 2;
    auto child = comm.split(color, -r, comm.options());
    if (color == CCL_SPLIT_NOCOLOR) {
      if (child != nullptr) ++wrong;
    } else {
      // Members of my color, ordered by key -rank: the highest parent rank is rank 0.
      std::vector<int> members;
      for (int q = n - 1; q >= 0; --q) {
        if (q % 2 == color && !(n > 2 && q == n - 1)) members.push_back(q);
      }
      if (child == nullptr || child->nranks() != static_cast<int>(members.size()) ||
          members[child->rank()] != r) {
        ++wrong;
        return;
      }
    }
    // The child and the parent used one after the other, twice.
    for (int round = 0; round < 2; ++round) {
      if (child) {
        int64_t x = r, sum = 0;
        test::all_reduce(*child, &x, &sum, 1, cclInt64, cclSum);
        int64_t want = 0;
        for (int q = 0; q < n; ++q) want += (q % 2 == color && !(n > 2 && q == n - 1)) ? q : 0;
        if (sum != want) ++wrong;
      }
      int64_t one = 1, total = 0;
      test::all_reduce(comm, &one, &total, 1, cclInt64, cclSum);
      if (total != n) ++wrong;
    }
    if (child) {
      // A non-blocking split (cclCommSplit with blocking = 0) joins on the new communicator's
      // own thread; its first collective waits for that join.
      CommOptions background = child->options();
      background.blocking = false;
      auto grandchild = child->split(0, 0, background);
      if (!grandchild || grandchild->nranks() != child->nranks()) {
        ++wrong;
        return;
      }
      // A query of what init makes waits for it too (TSan saw both race with the init thread).
      const std::string to_first = grandchild->peer_transport(0);
      if (grandchild->rank() == 0 ? to_first != "self"
                                  : (to_first == "self" || to_first == "none")) {
        ++wrong;
      }
      int64_t one = 1, total = 0;
      test::all_reduce(*grandchild, &one, &total, 1, cclInt64, cclSum);
      if (total != grandchild->nranks() || grandchild->poll_async_error() != cclSuccess) ++wrong;
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(CollectiveSet, PreMulSumScalesEachRanksInput) {
  const int n = GetParam();
  std::atomic<int> wrong{0};
  run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    float scalar = static_cast<float>(r + 1);
    const cclRedOp_t op = comm.reduction_ops().create_premul_sum(&scalar, cclFloat32, 0);
    scalar = 100;  // read at creation: changing it afterwards has no effect
    for (size_t count : {size_t{1}, size_t{7}, size_t{5000}, size_t{300001}}) {
      std::vector<float> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(i % 7);
      test::all_reduce(comm, in.data(), out.data(), count, cclFloat32, op);
      const float factor = static_cast<float>(n * (n + 1) / 2);
      for (size_t i = 0; i < count; ++i) wrong += out[i] != factor * static_cast<float>(i % 7);
      test::reduce(comm, in.data(), in.data(), count, cclFloat32, op, 0);
      if (r == 0) {
        for (size_t i = 0; i < count; ++i) wrong += in[i] != factor * static_cast<float>(i % 7);
      }
    }
    comm.reduction_ops().destroy(op);
    EXPECT_THROW(comm.reduction_ops().check(op, cclFloat32, "test"), Error);
  });
  EXPECT_EQ(wrong.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveSet, ::testing::Range(1, 9),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace ccl
