// The shm transport with ranks as threads of one process (they share /dev/shm and futexes
// exactly as processes would).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "base/error.h"
#include "shm_harness.h"
#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_segment.h"

namespace ccl::test {
namespace {

using namespace std::chrono_literals;
using transport::RecvRequest;
using transport::SendRequest;
using transport::ShmOptions;

void expect_all_ok(const std::vector<std::string>& errors) {
  for (size_t i = 0; i < errors.size(); ++i) EXPECT_EQ(errors[i], "") << "rank " << i;
}

ShmOptions small_ring(size_t slots, size_t slot_bytes) {
  ShmOptions options;
  options.slots = slots;
  options.slot_bytes = slot_bytes;
  return options;
}

// Runs `body` on `connection` and returns the ccl::Error it throws (code cclSuccess if none).
Error error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  }
  return Error(cclSuccess, "");
}

TEST(ShmThreads, MatrixTwoRanksDefaultRing) {
  size_t s = transport::shm_options_from_config().slot_bytes;
  expect_all_ok(run_shm_threads(2, {}, [&](RankEnv& env) {
    exchange_matrix(*env.transport, env.by_peer, env.rank, env.nranks, matrix_sizes(s),
                    env.deadline);
  }));
}

TEST(ShmThreads, MatrixFourRanksDefaultRing) {
  size_t s = transport::shm_options_from_config().slot_bytes;
  expect_all_ok(run_shm_threads(4, {}, [&](RankEnv& env) {
    exchange_matrix(*env.transport, env.by_peer, env.rank, env.nranks, matrix_sizes(s),
                    env.deadline);
  }));
}

TEST(ShmThreads, MatrixFourRanksTinyRing) {
  // Two slots of 4 KiB: every message larger than 8 KiB wraps the ring many times, and the
  // ranks sleep and wake thousands of times. wait() never times out here (60 s slices), so a
  // lost wake-up would stall until the deadline and fail the test.
  HarnessOptions options;
  options.shm = small_ring(2, 4096);
  options.shm->liveness_interval = 60s;
  expect_all_ok(run_shm_threads(4, options, [&](RankEnv& env) {
    exchange_matrix(*env.transport, env.by_peer, env.rank, env.nranks, matrix_sizes(4096),
                    env.deadline, 60s);
  }));
}

// CCL_SHM_POOL: a segment keeps the full ring while it fits the pool, and shrinks its rings
// evenly when more peers would not (16 and 32 local ranks of the default 4 MiB rings: 1 GiB and
// 4 GiB in all before; now at most the pool per rank).
TEST(ShmPool, RingsShrinkToFitThePool) {
  ShmOptions options;  // 8 slots x 512 KiB, 1 MiB window, 32 MiB pool
  const size_t window = options.window_bytes;
  EXPECT_EQ(transport::pooled_slot_bytes(options, 1, window), options.slot_bytes);
  EXPECT_EQ(transport::pooled_slot_bytes(options, 7, window), options.slot_bytes) << "8 ranks";
  for (size_t channels : {15, 31, 63, 127}) {
    const size_t slot = transport::pooled_slot_bytes(options, channels, window);
    EXPECT_LT(slot, options.slot_bytes) << channels;
    EXPECT_EQ(slot % transport::kPieceAlign, 0u) << channels;
    const transport::shm::SegmentGeometry g{options.slots, slot, channels, window};
    EXPECT_LE(g.total_bytes(), options.pool_bytes) << channels << " channels";
    // And no more than a page per channel of it unused: the share is not wasted.
    EXPECT_GT(g.total_bytes() + channels * 2 * transport::shm::kPage, options.pool_bytes);
  }
  // A pool too small for even one piece per slot: the smallest ring, larger than the pool.
  EXPECT_EQ(transport::pooled_slot_bytes(options, 100000, window), transport::kPieceAlign);
  options.pool_bytes = 0;  // no limit
  EXPECT_EQ(transport::pooled_slot_bytes(options, 127, window), options.slot_bytes);
}

// Messages larger than the pooled rings still arrive whole and in order.
TEST(ShmPool, FourRanksThroughPooledRings) {
  HarnessOptions options;
  options.shm = small_ring(4, 64 * 1024);
  options.shm->window_bytes = 0;
  options.shm->pool_bytes = 512 << 10;  // three inbound rings in 512 KiB
  const size_t slot = transport::pooled_slot_bytes(*options.shm, 3, options.shm->window_bytes);
  ASSERT_LT(slot, options.shm->slot_bytes);
  expect_all_ok(run_shm_threads(4, options, [&](RankEnv& env) {
    exchange_matrix(*env.transport, env.by_peer, env.rank, env.nranks, matrix_sizes(slot),
                    env.deadline);
  }));
}

TEST(ShmThreads, ManyMessagesInOrder) {
  HarnessOptions options;
  options.shm = small_ring(3, 1024);
  std::vector<size_t> sizes;
  std::mt19937 random(7);
  for (int i = 0; i < 400; ++i) sizes.push_back(random() % (10 * 1024 + 1));
  for (int i = 0; i < 20; ++i) sizes[random() % sizes.size()] = 0;
  expect_all_ok(run_shm_threads(2, options, [&](RankEnv& env) {
    exchange_matrix(*env.transport, env.by_peer, env.rank, env.nranks, sizes, env.deadline);
  }));
}

// A receive from any source takes only point-to-point messages: with a collective's message
// next from the peer, incoming() says no; once it is received, the point-to-point one behind it
// is reported, and both are delivered in order.
TEST(ShmThreads, OnlyPointToPointMessagesAreIncoming) {
  HarnessOptions options;
  options.shm = small_ring(4, 4096);
  constexpr size_t kSmall = 100, kLarge = 3 * 4096 + 7;
  std::atomic<bool> first_sent{false};
  expect_all_ok(run_shm_threads(2, options, [&](RankEnv& env) {
    const Deadline deadline = Deadline::after(10s);
    if (env.rank == 0) {
      std::vector<std::byte> a(kSmall), b(kLarge);
      fill_pattern(a.data(), kSmall, 0, 1, 0);
      fill_pattern(b.data(), kLarge, 0, 1, 1);
      SendRequest sa{a.data(), kSmall}, sb{b.data(), kLarge};
      sb.point_to_point = true;
      env.by_peer[1]->post_send(&sa);
      drive(
          *env.transport, env.by_peer, [&] { return sa.complete; }, deadline);
      first_sent = true;
      env.by_peer[1]->post_send(&sb);
      drive(
          *env.transport, env.by_peer, [&] { return sb.complete; }, deadline);
      return;
    }
    transport::Connection* from_0 = env.by_peer[0];
    require(from_0->can_probe(), "shm cannot probe");
    while (!first_sent) std::this_thread::sleep_for(1ms);
    for (int i = 0; i < 50; ++i) {
      require(!from_0->incoming(), "a collective's message was reported");
      std::this_thread::sleep_for(100us);
    }
    VerifySink first(kSmall, 0, 1, 0);
    RecvRequest ra{kSmall, &first};
    from_0->post_recv(&ra);
    drive(
        *env.transport, env.by_peer, [&] { return ra.complete; }, deadline);
    bool seen = false;
    while (!seen && !deadline.expired()) {
      seen = from_0->incoming();
      std::this_thread::sleep_for(100us);
    }
    require(seen, "the point-to-point message behind it was not reported");
    VerifySink second(kLarge, 0, 1, 1);
    RecvRequest rb{kLarge, &second};
    from_0->post_recv(&rb);
    require(!from_0->incoming(), "reported with a receive posted");
    drive(
        *env.transport, env.by_peer, [&] { return rb.complete; }, deadline);
    require(first.result().empty(), first.result());
    require(second.result().empty(), second.result());
  }));
}

// With a huge liveness interval, wait() sleeps until it is woken: a lost wake-up would stall the
// transfer until the 10 s deadline and fail the test.
TEST(ShmThreads, FullRingSlowConsumerWakesProducer) {
  HarnessOptions options;
  options.shm = small_ring(2, 4096);
  options.shm->liveness_interval = 60s;
  constexpr size_t kBytes = 1 << 20;
  expect_all_ok(run_shm_threads(2, options, [&](RankEnv& env) {
    Deadline deadline = Deadline::after(10s);
    if (env.rank == 0) {
      std::vector<std::byte> data(kBytes);
      fill_pattern(data.data(), kBytes, 0, 1, 0);
      SendRequest send{data.data(), kBytes};
      env.by_peer[1]->post_send(&send);
      size_t waits = drive(
          *env.transport, env.by_peer, [&] { return send.complete; }, deadline, 60s);
      require(waits > 0, "the producer never had to wait");
    } else {
      std::this_thread::sleep_for(200ms);  // the producer fills the ring and sleeps
      struct SlowSink : VerifySink {
        using VerifySink::VerifySink;
        void consume(const std::byte* piece, size_t offset, size_t length) override {
          std::this_thread::sleep_for(100us);
          VerifySink::consume(piece, offset, length);
        }
      } sink(kBytes, 0, 1, 0);
      RecvRequest recv{kBytes, &sink};
      env.by_peer[0]->post_recv(&recv);
      drive(
          *env.transport, env.by_peer, [&] { return recv.complete; }, deadline, 60s);
      require(sink.result().empty(), sink.result());
    }
  }));
}

TEST(ShmThreads, SlowProducerWakesConsumer) {
  HarnessOptions options;
  options.shm = small_ring(4, 4096);
  options.shm->liveness_interval = 60s;
  constexpr int kMessages = 40;
  expect_all_ok(run_shm_threads(2, options, [&](RankEnv& env) {
    Deadline deadline = Deadline::after(10s);
    if (env.rank == 0) {
      std::vector<std::byte> data(10000);
      for (int m = 0; m < kMessages; ++m) {
        std::this_thread::sleep_for(2ms);  // the consumer goes to sleep in between
        fill_pattern(data.data(), data.size(), 0, 1, m);
        SendRequest send{data.data(), data.size()};
        env.by_peer[1]->post_send(&send);
        drive(
            *env.transport, env.by_peer, [&] { return send.complete; }, deadline, 60s);
      }
    } else {
      size_t waits = 0;
      for (int m = 0; m < kMessages; ++m) {
        VerifySink sink(10000, 0, 1, m);
        RecvRequest recv{10000, &sink};
        env.by_peer[0]->post_recv(&recv);
        waits += drive(
            *env.transport, env.by_peer, [&] { return recv.complete; }, deadline, 60s);
        require(sink.result().empty(), sink.result());
      }
      require(waits > 0, "the consumer never had to wait");
    }
  }));
}

TEST(ShmThreads, SizeMismatchDetected) {
  HarnessOptions options;
  options.shm = small_ring(4, 4096);
  expect_all_ok(run_shm_threads(2, options, [&](RankEnv& env) {
    std::vector<std::byte> data(200);
    if (env.rank == 0) {
      SendRequest send{data.data(), 100};
      env.by_peer[1]->post_send(&send);
      SendRequest second{data.data(), 0};
      env.by_peer[1]->post_send(&second);
      drive(
          *env.transport, env.by_peer, [&] { return second.complete; }, env.deadline);
    } else {
      CopySink sink(data.data(), 200);
      RecvRequest recv{200, &sink};
      env.by_peer[0]->post_recv(&recv);
      Error e = error_of([&] {
        drive(
            *env.transport, env.by_peer, [&] { return recv.complete; }, env.deadline);
      });
      if (e.code() != cclInternalError) fail(std::string("wrong error: ") + e.what());
      require(std::string(e.what()) ==
                  "message size mismatch with rank 0: expected 200 bytes, peer sent 100",
              e.what());
      require(!recv.complete && recv.done_bytes == 0, "mismatched bytes were delivered");
    }
  }));
}

TEST(ShmThreads, ZeroByteExpectedButDataSent) {
  HarnessOptions options;
  options.shm = small_ring(4, 4096);
  expect_all_ok(run_shm_threads(2, options, [&](RankEnv& env) {
    std::vector<std::byte> data(64);
    if (env.rank == 1) {
      SendRequest send{data.data(), 64};
      env.by_peer[0]->post_send(&send);
      drive(
          *env.transport, env.by_peer, [&] { return send.complete; }, env.deadline);
    } else {
      CopySink sink(data.data(), 0);
      RecvRequest recv{0, &sink};
      env.by_peer[1]->post_recv(&recv);
      Error e = error_of([&] {
        drive(
            *env.transport, env.by_peer, [&] { return recv.complete; }, env.deadline);
      });
      require(std::string(e.what()) ==
                  "message size mismatch with rank 1: expected 0 bytes, peer sent 64",
              e.what());
    }
  }));
}

TEST(ShmThreads, InterruptReleasesWaiter) {
  HarnessOptions options;
  options.shm = small_ring(4, 4096);
  options.shm->liveness_interval = 60s;
  expect_all_ok(run_shm_threads(2, options, [&](RankEnv& env) {
    std::vector<std::byte> data(64);
    if (env.rank == 0) {
      CopySink sink(data.data(), 64);
      RecvRequest recv{64, &sink};
      env.by_peer[1]->post_recv(&recv);
      std::thread interrupter([&] {
        std::this_thread::sleep_for(100ms);
        env.transport->interrupt();
      });
      auto start = std::chrono::steady_clock::now();
      env.transport->wait(20s);
      auto waited = std::chrono::steady_clock::now() - start;
      interrupter.join();
      require(waited < 5s, "interrupt() did not release wait()");
      require(!recv.complete, "nothing was sent yet");
      env.store->set(env.tag + "/test/released", Bytes{1});
      drive(
          *env.transport, env.by_peer, [&] { return recv.complete; }, env.deadline);
      // An interrupt before the wait is not lost either.
      env.transport->interrupt();
      start = std::chrono::steady_clock::now();
      env.transport->wait(20s);
      require(std::chrono::steady_clock::now() - start < 5s, "early interrupt() was lost");
    } else {
      env.store->get(env.tag + "/test/released", env.deadline);
      SendRequest send{data.data(), 64};
      env.by_peer[0]->post_send(&send);
      drive(
          *env.transport, env.by_peer, [&] { return send.complete; }, env.deadline);
    }
  }));
}

TEST(ShmThreads, SecondConnectRejected) {
  HarnessOptions options;
  options.shm = small_ring(2, 64);
  expect_all_ok(run_shm_threads(2, options, [&](RankEnv& env) {
    transport::SetupContext ctx;
    ctx.rank = env.rank;
    ctx.nranks = env.nranks;
    ctx.comm_tag = env.tag;
    ctx.store = env.store;
    require(env.transport->connect(ctx, {}).empty(), "connect({}) returned connections");
    int peer = 1 - env.rank;
    Error e = error_of([&] { env.transport->connect(ctx, std::span<const int>(&peer, 1)); });
    if (e.code() != cclInvalidUsage) fail(std::string("second connect: ") + e.what());
  }));
}

TEST(ShmThreads, ConnectTimeoutLeavesNothing) {
  InMemoryStore store;
  std::string tag = unique_tag();
  HarnessOptions options;
  options.shm = small_ring(2, 4096);
  // Rank 1 never shows up.
  Error e = error_of([&] { connect_rank(store, tag, 0, 2, options, Deadline::after(300ms)); });
  EXPECT_EQ(e.code(), cclTimeout) << e.what();
  EXPECT_TRUE(shm_files_of(tag).empty());
}

TEST(ShmThreads, BadPeersRejected) {
  InMemoryStore store;
  transport::SetupContext ctx;
  ctx.rank = 0;
  ctx.nranks = 2;
  ctx.comm_tag = unique_tag();
  ctx.store = &store;
  auto shm = transport::make_shm_transport(ctx, small_ring(2, 64));
  for (std::vector<int> peers : {std::vector<int>{0}, {2}, {-1}, {1, 1}}) {
    Error e = error_of([&] { shm->connect(ctx, peers); });
    EXPECT_EQ(e.code(), cclInternalError) << e.what();
  }
  EXPECT_TRUE(shm_files_of(ctx.comm_tag).empty());
}

TEST(ShmThreads, OptionsValidated) {
  transport::SetupContext ctx;
  for (auto [slots, bytes] : {std::pair<size_t, size_t>{0, 4096}, {2, 0}, {2, 100}, {5000, 64}}) {
    // Captured by name: clang before 16 cannot capture structured bindings.
    Error e = error_of([&, slots = slots, bytes = bytes] {
      transport::make_shm_transport(ctx, small_ring(slots, bytes));
    });
    EXPECT_EQ(e.code(), cclInvalidUsage) << slots << " x " << bytes;
  }
}

TEST(ShmThreads, OptionsFromConfig) {
  setenv("CCL_BUFFSIZE", "1M", 1);
  setenv("CCL_SHM_SLOTS", "3", 1);
  ShmOptions options = transport::shm_options_from_config();
  EXPECT_EQ(options.slots, 3u);
  EXPECT_EQ(options.slot_bytes, (1u << 20) / 3 / 64 * 64);
  setenv("CCL_SHM_SLOTS", "0", 1);
  EXPECT_EQ(error_of([] { transport::shm_options_from_config(); }).code(), cclInvalidUsage);
  setenv("CCL_SHM_SLOTS", "8", 1);
  setenv("CCL_BUFFSIZE", "256", 1);  // 32-byte slots
  EXPECT_EQ(error_of([] { transport::shm_options_from_config(); }).code(), cclInvalidUsage);
  unsetenv("CCL_BUFFSIZE");
  unsetenv("CCL_SHM_SLOTS");
  options = transport::shm_options_from_config();
  EXPECT_EQ(options.slots, 8u);
  EXPECT_EQ(options.slot_bytes, 512u * 1024);
}

TEST(ShmThreads, SegmentNames) {
  EXPECT_EQ(transport::shm::segment_name("job/7 a", 3), "/ccl-job_7_a-3");
  std::string a = transport::shm::segment_name(std::string(300, 'x') + "a", 0);
  std::string b = transport::shm::segment_name(std::string(300, 'x') + "b", 0);
  EXPECT_LT(a.size(), 200u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ccl::test
