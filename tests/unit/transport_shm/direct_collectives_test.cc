// The direct collectives (algorithms/direct.h) over the shm window, ranks as threads (and, for a
// dead peer, as processes): exact results for every size class (inline, one-shot, two-shot, the
// capacity), bit-identical floats on every rank, back-to-back operations that reuse mailboxes,
// and bounded waits.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "algorithms/direct.h"
#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "shm_harness.h"
#include "transport/registered_region.h"
#include "transport/shm/registered_memory.h"

namespace ccl::test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kWindow = 64 * 1024;
// The tests take the one-shot form up to this many bytes and the two-shot form above, so both
// run at every rank count.
constexpr size_t kOneshot = 1024;
bool one_shot(size_t bytes) { return bytes <= kOneshot; }

HarnessOptions window_options(size_t window_bytes = kWindow) {
  HarnessOptions options;
  options.shm = transport::ShmOptions{};
  options.shm->slots = 4;
  options.shm->slot_bytes = 16384;
  options.shm->window_bytes = window_bytes;
  return options;
}

// The many-piece tests move megabytes one piece at a time under one deadline per run: room for
// sanitizer builds on a loaded machine (TSan with two such tests side by side on 2 cores needs
// over 20 s for one run).
HarnessOptions many_pieces_options(size_t window_bytes) {
  HarnessOptions options = window_options(window_bytes);
  options.timeout = std::chrono::seconds(120);
  return options;
}

algo::ExecOp exec_op(cclDataType_t type, cclRedOp_t op, int nranks) {
  return algo::reduction_op(type, op, nranks);
}

algo::DirectCollectives direct(RankEnv& env) {
  transport::SharedWindow* window = env.transport->shared_window();
  require(window != nullptr, "no shared window");
  require(window->nranks() == env.nranks && window->rank() == env.rank, "window geometry");
  return algo::DirectCollectives(window, algo::WaitPolicy{}, nullptr);
}

// Rank r contributes (r + 1) * (i % 13 + 1) at index i: small integers, exact in every type.
int32_t contribution(int rank, size_t i) { return (rank + 1) * static_cast<int32_t>(i % 13 + 1); }

void expect_all_ok(const std::vector<std::string>& errors) {
  for (size_t i = 0; i < errors.size(); ++i) EXPECT_EQ(errors[i], "") << "rank " << i;
}

// Counts that hit every path: inline (<= 48 bytes), one-shot, two-shot with uneven chunks, and
// the whole window.
const size_t kCounts[] = {1, 7, 12, 13, 255, 256, 257, 1000, 4097, kWindow / 4};

TEST(DirectCollectives, AllReduceIntSumEveryPathAndRankCount) {
  for (int n = 2; n <= 5; ++n) {  // one rank has no peers, so no window
    expect_all_ok(run_shm_threads(n, window_options(), [&](RankEnv& env) {
      auto dc = direct(env);
      auto op = exec_op(cclInt32, cclSum, n);
      for (bool in_place : {false, true}) {
        for (size_t count : kCounts) {
          std::vector<int32_t> in(count), out(count, -1);
          for (size_t i = 0; i < count; ++i) in[i] = contribution(env.rank, i);
          int32_t* dst = in_place ? in.data() : out.data();
          dc.all_reduce(in.data(), dst, count, op, env.deadline, {"allreduce", count},
                        one_shot(count * sizeof(int32_t)));
          for (size_t i = 0; i < count; ++i) {
            int32_t want = (n * (n + 1) / 2) * static_cast<int32_t>(i % 13 + 1);
            if (dst[i] != want)
              fail("n=" + std::to_string(n) + " count=" + std::to_string(count) +
                   " i=" + std::to_string(i) + " got " + std::to_string(dst[i]));
          }
        }
      }
    }));
  }
}

TEST(DirectCollectives, AllReduceAvgAndMaxInOtherTypes) {
  const int n = 3;
  expect_all_ok(run_shm_threads(n, window_options(), [&](RankEnv& env) {
    auto dc = direct(env);
    for (size_t count : {size_t{5}, size_t{3000}}) {
      std::vector<double> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = contribution(env.rank, i);
      dc.all_reduce(in.data(), out.data(), count, exec_op(cclFloat64, cclAvg, n), env.deadline,
                    {"avg", 0}, one_shot(count * sizeof(double)));
      for (size_t i = 0; i < count; ++i) require(out[i] == 2.0 * (i % 13 + 1), "avg");
      std::vector<int8_t> bin(count), bout(count);
      for (size_t i = 0; i < count; ++i) bin[i] = static_cast<int8_t>(env.rank * 10 - 5);
      dc.all_reduce(bin.data(), bout.data(), count, exec_op(cclInt8, cclMax, n), env.deadline,
                    {"max", 0}, one_shot(count));
      for (size_t i = 0; i < count; ++i) require(bout[i] == 15, "max");
    }
  }));
}

// Floats that round differently depending on the order of the sums: every rank must still get
// the same bits (each adds in rank order).
TEST(DirectCollectives, FloatResultsBitIdenticalOnEveryRank) {
  const int n = 4;
  const size_t count = 5000;
  std::vector<std::vector<float>> results(n);
  // The ranks compare each other's results through this process's memory: a thread barrier
  // orders that for ThreadSanitizer too (the window's flags live at a different address in each
  // rank's mapping, so TSan cannot pair their release and acquire).
  std::barrier sync(n);
  expect_all_ok(run_shm_threads(n, window_options(), [&](RankEnv& env) {
    auto dc = direct(env);
    std::mt19937 gen(env.rank + 1);
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    for (size_t c : {size_t{9}, size_t{200}, count}) {
      std::vector<float> in(c);
      for (auto& v : in) v = dist(gen);
      results[env.rank].assign(c, 0.0f);
      dc.all_reduce(in.data(), results[env.rank].data(), c, exec_op(cclFloat32, cclSum, n),
                    env.deadline, {"allreduce", c}, one_shot(c * sizeof(float)));
      dc.barrier(env.deadline, {"barrier", 0});
      sync.arrive_and_wait();
      for (int r = 0; r < n; ++r) {
        if (std::memcmp(results[r].data(), results[env.rank].data(), c * sizeof(float)) != 0)
          fail("rank " + std::to_string(r) + " differs at count " + std::to_string(c));
      }
      dc.barrier(env.deadline, {"barrier", 1});
      sync.arrive_and_wait();
    }
  }));
}

// Back-to-back operations of changing kinds, sizes and roots: a mailbox is rewritten two
// operations later, whether or not the slowest reader of the last use is done (the guard).
TEST(DirectCollectives, MixedBackToBackOperations) {
  for (int n : {2, 3, 4}) {
    expect_all_ok(run_shm_threads(n, window_options(), [&](RankEnv& env) {
      auto dc = direct(env);
      auto op = exec_op(cclInt32, cclSum, n);
      for (int iter = 0; iter < 300; ++iter) {
        const size_t count = kCounts[(iter * 7) % std::size(kCounts)];
        std::vector<int32_t> in(count), out(count);
        for (size_t i = 0; i < count; ++i) in[i] = contribution(env.rank, i + iter);
        switch (iter % 4) {
          case 0:
            dc.all_reduce(in.data(), out.data(), count, op, env.deadline, {"allreduce", 0},
                          one_shot(count * op.elem_size));
            for (size_t i = 0; i < count; ++i) {
              if (out[i] != (n * (n + 1) / 2) * static_cast<int32_t>((i + iter) % 13 + 1))
                fail("allreduce at iteration " + std::to_string(iter));
            }
            break;
          case 1: {
            const int root = iter % n;
            dc.broadcast(in.data(), out.data(), count * 4, root, env.deadline, {"bcast", 0});
            for (size_t i = 0; i < count; ++i) {
              if (out[i] != contribution(root, i + iter))
                fail("broadcast at iteration " + std::to_string(iter));
            }
            break;
          }
          case 2: {
            std::vector<int32_t> all(count * n);
            dc.all_gather(in.data(), all.data(), count * 4, env.deadline, {"allgather", 0});
            for (int r = 0; r < n; ++r) {
              for (size_t i = 0; i < count; ++i) {
                if (all[r * count + i] != contribution(r, i + iter))
                  fail("allgather at iteration " + std::to_string(iter));
              }
            }
            break;
          }
          default:
            dc.barrier(env.deadline, {"barrier", 0});
        }
      }
    }));
  }
}

// A broadcast of many pieces (each published as soon as it is in the mailbox), in place and not,
// from every root, back to back.
TEST(DirectCollectives, PipelinedBroadcastOfManyPieces) {
  const size_t window = 512 * 1024;
  const HarnessOptions options = many_pieces_options(window);  // one deadline, 18 broadcasts
  for (int n : {3}) {  // the root and two receivers (sanitizer builds run this 10x slower)
    expect_all_ok(run_shm_threads(n, options, [&](RankEnv& env) {
      auto dc = direct(env);
      for (size_t bytes :
           {window, 5 * algo::DirectCollectives::kBroadcastPiece + 12, size_t{100}}) {
        for (int root = 0; root < n; ++root) {
          for (bool in_place : {false, true}) {
            std::vector<uint8_t> in(bytes), out(bytes, 0);
            for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(i * 7 + env.rank);
            uint8_t* dst = in_place ? in.data() : out.data();
            dc.broadcast(in.data(), dst, bytes, root, env.deadline, {"broadcast", 0});
            for (size_t i = 0; i < bytes; ++i) {
              if (dst[i] != static_cast<uint8_t>(i * 7 + root))
                fail("broadcast of " + std::to_string(bytes) + " from " + std::to_string(root) +
                     " at byte " + std::to_string(i));
            }
          }
        }
      }
    }));
  }
}

// Large out-of-place broadcasts let the receivers read a third of the root's input from its
// process (cross-memory attach, direct_cma.cc) once a probe found that every rank can; with it
// switched off on one rank (CCL_SHM_CMA=0 there), all ranks agree not to, and every result is
// exact either way. Ranks as threads, each connected with its own options.
TEST(DirectCollectives, BroadcastReadsTheRootsMemoryOnlyWhereEveryRankCan) {
  const size_t window = 512 * 1024;
  for (int off_rank : {-1, 2}) {
    const int n = 3;
    std::string tag = unique_tag();
    FileStore store;
    std::vector<std::string> failures(n);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < n; ++rank) {
      threads.emplace_back([&, rank] {
        try {
          HarnessOptions options = many_pieces_options(window);
          options.shm->cma = rank != off_rank;
          ConnectedRank me = connect_rank(store, tag, rank, n, options, Deadline::after(60s));
          algo::DirectCollectives dc(me.transport->shared_window(), algo::WaitPolicy{}, nullptr);
          const Deadline deadline = Deadline::after(120s);
          for (size_t bytes : {window, algo::DirectCollectives::kCmaBroadcastMin + 7}) {
            for (int root = 0; root < n; ++root) {
              for (bool in_place : {false, true}) {
                std::vector<uint8_t> in(bytes), out(bytes, 0);
                for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(i * 11 + rank);
                uint8_t* dst = in_place ? in.data() : out.data();
                dc.broadcast(in.data(), dst, bytes, root, deadline, {"broadcast", 0});
                for (size_t i = 0; i < bytes; ++i) {
                  if (dst[i] != static_cast<uint8_t>(i * 11 + root))
                    fail("broadcast of " + std::to_string(bytes) + " from " + std::to_string(root) +
                         " at byte " + std::to_string(i));
                }
              }
            }
          }
          require(dc.reads_root_memory() == (off_rank < 0),
                  off_rank < 0 ? "the probe found no cross-memory attach"
                               : "cross-memory attach used although one rank cannot");
        } catch (const std::exception& e) {
          failures[rank] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r << ", off " << off_rank;
  }
}

// Allgather blocks of many pieces and of a few bytes, in place (the own block already in the
// output) and not.
TEST(DirectCollectives, AllGatherOfManyPiecesInAndOutOfPlace) {
  const size_t window = 512 * 1024;
  for (int n : {2, 3}) {
    expect_all_ok(run_shm_threads(n, many_pieces_options(window), [&](RankEnv& env) {
      auto dc = direct(env);
      for (size_t bytes : {window, 3 * algo::DirectCollectives::kBroadcastPiece + 5, size_t{3}}) {
        for (bool in_place : {false, true}) {
          std::vector<uint8_t> in(bytes), out(bytes * n, 0);
          for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(i * 7 + env.rank);
          const uint8_t* src = in.data();
          if (in_place) {
            std::copy(in.begin(), in.end(), out.begin() + env.rank * bytes);
            src = out.data() + env.rank * bytes;
          }
          dc.all_gather(src, out.data(), bytes, env.deadline, {"allgather", 0});
          for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < bytes; ++i) {
              if (out[r * bytes + i] != static_cast<uint8_t>(i * 7 + r))
                fail("allgather of " + std::to_string(bytes) + " from " + std::to_string(r) +
                     " at byte " + std::to_string(i));
            }
          }
        }
      }
    }));
  }
}

// All-to-all blocks of many pieces and of a few bytes, in place and not, back to back with
// allgathers (mailbox reuse across different collectives).
TEST(DirectCollectives, AllToAllOfManyPiecesInAndOutOfPlace) {
  const size_t window = 512 * 1024;
  for (int n : {2, 3, 4}) {
    expect_all_ok(run_shm_threads(n, many_pieces_options(window), [&](RankEnv& env) {
      auto dc = direct(env);
      auto value = [](int from, int to, size_t i) {
        return static_cast<uint8_t>(i * 7 + from * 5 + to);
      };
      for (size_t bytes : {window / n, window / n - 7, size_t{3}}) {
        for (bool in_place : {false, true}) {
          std::vector<uint8_t> in(bytes * n), out(bytes * n, 0);
          for (int to = 0; to < n; ++to) {
            for (size_t i = 0; i < bytes; ++i) in[to * bytes + i] = value(env.rank, to, i);
          }
          uint8_t* dst = in_place ? in.data() : out.data();
          dc.all_to_all(in.data(), dst, bytes, env.deadline, {"alltoall", 0});
          for (int from = 0; from < n; ++from) {
            for (size_t i = 0; i < bytes; ++i) {
              if (dst[from * bytes + i] != value(from, env.rank, i))
                fail("alltoall of " + std::to_string(bytes) + " from " + std::to_string(from) +
                     " at byte " + std::to_string(i));
            }
          }
          std::vector<uint8_t> all(n);
          const uint8_t mine = static_cast<uint8_t>(env.rank);
          dc.all_gather(&mine, all.data(), 1, env.deadline, {"allgather", 0});
          for (int r = 0; r < n; ++r) require(all[r] == r, "allgather after alltoall");
        }
      }
    }));
  }
}

TEST(DirectCollectives, OneShotAndTwoShotAgree) {
  // The same result whatever the form: two-shot is taken above the inline size when asked.
  expect_all_ok(run_shm_threads(3, window_options(), [&](RankEnv& env) {
    for (bool one_shot_form : {false, true}) {
      auto dc = direct(env);
      for (size_t count : kCounts) {
        std::vector<int32_t> in(count), out(count);
        for (size_t i = 0; i < count; ++i) in[i] = contribution(env.rank, i);
        dc.all_reduce(in.data(), out.data(), count, exec_op(cclInt32, cclSum, 3), env.deadline,
                      {"allreduce", 0}, one_shot_form);
        for (size_t i = 0; i < count; ++i) {
          require(out[i] == 6 * static_cast<int32_t>(i % 13 + 1), "two-shot result");
        }
      }
      dc.barrier(env.deadline, {"barrier", 0});
    }
  }));
}

TEST(DirectCollectives, NoWindowWithoutCapacity) {
  expect_all_ok(run_shm_threads(2, window_options(0), [&](RankEnv& env) {
    require(env.transport->shared_window() == nullptr, "window of 0 bytes");
  }));
}

// A rank that never comes (but stays: one that leaves fails the wait at once): the wait ends at
// the deadline with cclTimeout naming it.
TEST(DirectCollectives, MissingPeerTimesOut) {
  std::vector<cclResult_t> codes(2, cclSuccess);
  std::vector<std::string> messages(2);
  std::atomic<bool> rank0_done{false};
  expect_all_ok(run_shm_threads(2, window_options(), [&](RankEnv& env) {
    if (env.rank == 1) {
      const auto until = Clock::now() + 10s;
      while (!rank0_done && Clock::now() < until) std::this_thread::sleep_for(1ms);
      return;
    }
    struct Done {
      std::atomic<bool>& flag;
      ~Done() { flag = true; }
    } done{rank0_done};
    auto dc = direct(env);
    int32_t v = 1, out = 0;
    auto start = Clock::now();
    try {
      dc.all_reduce(&v, &out, 1, exec_op(cclInt32, cclSum, 2), Deadline::after(300ms),
                    {"allreduce", 7}, true);
    } catch (const Error& e) {
      codes[0] = e.code();
      messages[0] = e.what();
    }
    require(Clock::now() - start < 5s, "timeout took too long");
  }));
  EXPECT_EQ(codes[0], cclTimeout);
  EXPECT_EQ(messages[0], "allreduce #7: timed out waiting for rank 1");
}

// A peer process that exits before publishing: RemoteError within a wait slice, not the timeout.
TEST(DirectCollectives, ExitedPeerIsRemoteError) {
  std::string tag = unique_tag();
  FileStore store;
  HarnessOptions options = window_options();
  fflush(nullptr);
  int child = fork();
  if (child == 0) {
    try {
      ConnectedRank me = connect_rank(store, tag, 1, 2, options, Deadline::after(10s));
      store.set("child-connected", Bytes{1});
      store.get("parent-waiting", Deadline::after(10s));
      std::this_thread::sleep_for(100ms);
      // Without ever publishing, and without the goodbye its transport's destructor would leave
      // (a peer that left cleanly is "rank 1 left the communicator" instead).
      _exit(0);
    } catch (...) {
    }
    _exit(0);
  }
  ASSERT_GT(child, 0);
  {
    ConnectedRank me = connect_rank(store, tag, 0, 2, options, Deadline::after(10s));
    store.get("child-connected", Deadline::after(10s));
    algo::DirectCollectives dc(me.transport->shared_window(), algo::WaitPolicy{}, nullptr);
    store.set("parent-waiting", Bytes{1});
    cclResult_t code = cclSuccess;
    std::string message;
    auto start = Clock::now();
    try {
      int32_t v = 1, out = 0;
      dc.all_reduce(&v, &out, 1, exec_op(cclInt32, cclSum, 2), Deadline::after(20s),
                    {"allreduce", 1}, true);
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    }
    EXPECT_EQ(code, cclRemoteError) << message;
    EXPECT_EQ(message, "rank 1 (pid " + std::to_string(child) + ") exited");
    EXPECT_LT(Clock::now() - start, 3s);
  }
  EXPECT_EQ(wait_child(child, 10s), 0);
  EXPECT_TRUE(shm_files_of(tag).empty());
}

}  // namespace
}  // namespace ccl::test

namespace ccl::test {
namespace {

TEST(RegisteredMemory, FindsRegionsInsideOneAllocationOnly) {
  const size_t bytes = 3 * 4096 + 5;
  auto* base = static_cast<std::byte*>(transport::shm::registered_alloc(bytes));
  transport::RemoteRegion region;
  EXPECT_TRUE(transport::shm::registered_find(base, bytes, &region));
  EXPECT_TRUE(transport::shm::registered_find(base + 100, 4096, &region));
  EXPECT_TRUE(transport::shm::registered_find(base + 4 * 4096, 0, &region));     // the end
  EXPECT_FALSE(transport::shm::registered_find(base + 100, 4 * 4096, &region));  // past the end
  int local = 0;
  EXPECT_FALSE(transport::shm::registered_find(&local, sizeof(local), &region));
  transport::shm::registered_free(base);
  EXPECT_FALSE(transport::shm::registered_find(base, 1, &region));
  EXPECT_THROW(transport::shm::registered_free(base), Error);
}

TEST(RegisteredMemory, MapperSeesTheOwnersBytesAndRejectsBadHandles) {
  auto* base = static_cast<std::byte*>(transport::shm::registered_alloc(8192));
  base[5000] = std::byte{42};
  transport::RemoteRegion region;
  ASSERT_TRUE(transport::shm::registered_find(base + 4096, 4096, &region));
  transport::shm::RegisteredMapper mapper;
  std::byte* mapped = mapper.map(getpid(), region, 4096);
  ASSERT_NE(mapped, nullptr);
  EXPECT_NE(mapped, base + 4096);  // a second mapping of the same memory
  EXPECT_EQ(mapped[5000 - 4096], std::byte{42});
  mapped[1] = std::byte{7};
  EXPECT_EQ(base[4097], std::byte{7});
  EXPECT_EQ(mapper.map(getpid(), region, 4097), nullptr);  // more than the allocation holds
  transport::RemoteRegion garbage{{999, 12345, 0, 8192}};
  EXPECT_EQ(mapper.map(getpid(), garbage, 16), nullptr);  // no such fd
  EXPECT_EQ(mapper.map(999999999, region, 16), nullptr);  // no such process
  transport::shm::registered_free(base);
}

// Registered broadcast over the shm window, ranks as threads: every root, in place and not, a
// receiver in ordinary memory (the root then helps only the others), and an unregistered root
// (everyone falls back, and says so).
TEST(DirectCollectives, RegisteredBroadcast) {
  const int n = 3;
  const size_t bytes = 300000;
  // One deadline for 12 broadcasts of 300 KB: TSan needs about 14 CPU seconds for them.
  expect_all_ok(run_shm_threads(n, many_pieces_options(kWindow), [&](RankEnv& env) {
    auto dc = direct(env);
    auto* mem = static_cast<uint8_t*>(transport::shm::registered_alloc(2 * bytes + 128));
    // The allocation's registration, with the key the shm transport adds (its memfd handle).
    transport::RegisteredRegion registered;
    transport::page_span(mem, 2 * bytes + 128, &registered.base, &registered.bytes);
    registered.kind = MemoryKind::RegisteredHost;
    env.transport->register_memory(registered);
    require(registered.key_of(transport::shm::kShmKeyName) != nullptr, "no shm key");
    std::vector<uint8_t> plain(bytes);
    for (int root = 0; root < n; ++root) {
      for (int variant = 0; variant < 3; ++variant) {
        const bool in_place = variant != 0;
        const bool plain_receiver = variant == 2 && env.rank == (root + 1) % n;
        uint8_t* in = mem + 8;
        uint8_t* out = in_place && env.rank == root ? in
                       : plain_receiver             ? plain.data()
                                                    : mem + bytes + 72;
        for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(i * 5 + env.rank);
        const uint8_t* offered = env.rank == root ? in : out;
        const bool in_registered = offered != plain.data();
        bool done = dc.broadcast_registered(in, out, bytes, root, env.deadline, {"bcast", 0},
                                            in_registered ? &registered : nullptr);
        require(done, "registered broadcast fell back");
        for (size_t i = 0; i < bytes; ++i) {
          if (out[i] != static_cast<uint8_t>(i * 5 + root))
            fail("root " + std::to_string(root) + " variant " + std::to_string(variant) + " byte " +
                 std::to_string(i));
        }
      }
      std::vector<uint8_t> unregistered(bytes), out(bytes);
      // A root in ordinary memory (no registration), and one whose registration does not cover
      // its buffer: both fall back.
      require(!dc.broadcast_registered(unregistered.data(), out.data(), bytes, root, env.deadline,
                                       {"bcast", 1}, env.rank == root ? nullptr : &registered),
              "an unregistered root must fall back");
      require(!dc.broadcast_registered(unregistered.data(), out.data(), bytes, root, env.deadline,
                                       {"bcast", 2}, &registered),
              "a registration that does not cover the buffer must not be offered");
    }
    transport::shm::registered_free(mem);
  }));
}

}  // namespace
}  // namespace ccl::test
