// Messages between ucx transports of one process (a rank per transport), over tcp and over
// shared memory: sizes around every boundary (empty, one byte, kPieceAlign, chunks), each kind
// of sink, many outstanding, both directions, three ranks, size mismatches, wait/interrupt.
#include <gtest/gtest.h>

#include <thread>

#include "transport/ucx/ucx_chunking.h"
#include "ucx_test_util.h"

namespace ccl::transport::ucx_test {
namespace {

using std::chrono::milliseconds;

class UcxData : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { use_tls(GetParam()); }
};

// Sizes around kPieceAlign, a chunk, the RMA threshold and several chunks not a multiple of one.
const std::vector<size_t> kSizes = {0,
                                    1,
                                    63,
                                    64,
                                    65,
                                    4093,
                                    64 * 1024,
                                    ucx::kChunkBytes - 1,
                                    ucx::kChunkBytes,
                                    ucx::kChunkBytes + 1,
                                    (3 << 20) + 17,
                                    (5 << 20) + 4096 + 3};

struct Transfer {
  std::vector<std::byte> out;
  SendRequest send;
  std::unique_ptr<TestSink> sink;
  RecvRequest recv;
};

// Every size with every sink, all posted at once in both directions between ranks a and b.
void exchange_all(Mesh& mesh, int a, int b) {
  std::vector<std::unique_ptr<Transfer>> transfers;
  uint32_t seed = 1;
  for (int dir = 0; dir < 2; ++dir) {
    const int from = dir == 0 ? a : b, to = dir == 0 ? b : a;
    for (size_t bytes : kSizes) {
      for (SinkKind kind : {SinkKind::Copy, SinkKind::AlignCheck, SinkKind::Direct}) {
        auto t = std::make_unique<Transfer>();
        t->out = make_message(seed++, bytes);
        t->send = SendRequest{t->out.data(), bytes};
        t->sink = std::make_unique<TestSink>(kind, bytes);
        t->recv = RecvRequest{bytes, t->sink.get()};
        mesh.conn(from, to)->post_send(&t->send);
        mesh.conn(to, from)->post_recv(&t->recv);
        transfers.push_back(std::move(t));
      }
    }
  }
  mesh.drive_all([&] {
    for (auto& t : transfers) {
      if (!t->send.complete || !t->recv.complete) return false;
    }
    return true;
  });
  seed = 1;
  for (auto& t : transfers) {
    const uint32_t s = seed++;
    ASSERT_TRUE(t->recv.complete);
    EXPECT_EQ(t->recv.done_bytes, t->recv.bytes);
    EXPECT_EQ(t->send.done_bytes, t->send.bytes);
    EXPECT_EQ(first_mismatch(t->sink->data, s), -1) << t->recv.bytes << " bytes, seed " << s;
    EXPECT_TRUE(t->sink->errors.empty()) << t->sink->errors.front();
    if (t->sink->kind == SinkKind::Direct) {
      EXPECT_EQ(t->sink->pieces, 0u);
    }
  }
}

TEST_P(UcxData, EverySizeAndSinkBothWays) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  exchange_all(mesh, 0, 1);
  EXPECT_GT(stats_of(mesh.conn(1, 0)).staged_chunks, 0u);
}

TEST_P(UcxData, ThreeRanksEveryPair) {
  Mesh mesh(3);
  ASSERT_TRUE(mesh.ok());
  exchange_all(mesh, 0, 1);
  exchange_all(mesh, 1, 2);
  exchange_all(mesh, 2, 0);
}

// Many small messages outstanding at once: each lands in its own receive, in posting order.
TEST_P(UcxData, ManyOutstandingKeepOrder) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  constexpr int kCount = 300;
  std::vector<std::vector<std::byte>> outs(kCount);
  std::vector<SendRequest> sends(kCount);
  std::vector<std::unique_ptr<TestSink>> sinks(kCount);
  std::vector<RecvRequest> recvs(kCount);
  for (int i = 0; i < kCount; ++i) {
    const size_t bytes = 1 + (i * 37) % 2000;
    outs[i] = make_message(1000 + i, bytes);
    sends[i] = SendRequest{outs[i].data(), bytes};
    sinks[i] = std::make_unique<TestSink>(i % 2 ? SinkKind::Direct : SinkKind::Copy, bytes);
    recvs[i] = RecvRequest{bytes, sinks[i].get()};
  }
  // Receives posted late for half of them: those messages wait in UCX's unexpected queue.
  for (int i = 0; i < kCount / 2; ++i) mesh.conn(1, 0)->post_recv(&recvs[i]);
  for (int i = 0; i < kCount; ++i) mesh.conn(0, 1)->post_send(&sends[i]);
  mesh.drive_all([&] { return sends[kCount / 2 - 1].complete; });
  for (int i = kCount / 2; i < kCount; ++i) mesh.conn(1, 0)->post_recv(&recvs[i]);
  mesh.drive_all([&] { return recvs[kCount - 1].complete && sends[kCount - 1].complete; });
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(recvs[i].complete) << i;
    EXPECT_EQ(first_mismatch(sinks[i]->data, 1000 + i), -1) << "message " << i;
  }
}

// A receive from any source takes only point-to-point messages: with a collective's message
// next from the peer, incoming() says no; once it is received, the point-to-point one behind it
// (chunked: 300000 bytes) is reported, and both are delivered in order.
TEST_P(UcxData, OnlyPointToPointMessagesAreIncoming) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  Connection* receiver = mesh.conn(1, 0);
  ASSERT_TRUE(receiver->can_probe());
  auto a = make_message(21, 100), b = make_message(22, 300000);
  SendRequest sa{a.data(), a.size()}, sb{b.data(), b.size()};
  sb.point_to_point = true;
  mesh.conn(0, 1)->post_send(&sa);
  mesh.conn(0, 1)->post_send(&sb);
  mesh.drive_all([&] { return sa.complete; });
  for (int i = 0; i < 50; ++i) {
    mesh.conn(0, 1)->progress();
    EXPECT_FALSE(receiver->incoming()) << "a collective's message was reported";
  }
  TestSink ka(SinkKind::Copy, 100);
  RecvRequest ra{100, &ka};
  receiver->post_recv(&ra);
  mesh.drive_all([&] { return ra.complete; });
  bool seen = false;
  mesh.drive_all([&] {
    mesh.conn(0, 1)->progress();
    seen = receiver->incoming();
    return seen;
  });
  EXPECT_TRUE(seen) << "the point-to-point message behind it was not reported";
  TestSink kb(SinkKind::Direct, b.size());
  RecvRequest rb{b.size(), &kb};
  receiver->post_recv(&rb);
  mesh.drive_all([&] { return rb.complete && sb.complete; });
  EXPECT_EQ(first_mismatch(ka.data, 21), -1);
  EXPECT_EQ(first_mismatch(kb.data, 22), -1);
}

// Receives posted before the sends, the sender far behind: nothing is lost or reordered.
TEST_P(UcxData, ReceiverFirstLargeMessages) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  const size_t bytes = (7 << 20) + 123;
  auto a = make_message(7, bytes), b = make_message(8, bytes);
  TestSink sa(SinkKind::AlignCheck, bytes), sb(SinkKind::Direct, bytes);
  RecvRequest ra{bytes, &sa}, rb{bytes, &sb};
  mesh.conn(1, 0)->post_recv(&ra);
  mesh.conn(1, 0)->post_recv(&rb);
  mesh.drive_all([] { return true; });
  SendRequest send_a{a.data(), bytes}, send_b{b.data(), bytes};
  mesh.conn(0, 1)->post_send(&send_a);
  mesh.conn(0, 1)->post_send(&send_b);
  mesh.drive_all([&] { return ra.complete && rb.complete && send_a.complete && send_b.complete; });
  EXPECT_EQ(first_mismatch(sa.data, 7), -1);
  EXPECT_EQ(first_mismatch(sb.data, 8), -1);
  EXPECT_TRUE(sa.errors.empty());
}

// Rank 1 expects `expected` bytes, rank 0 sends `sent`: rank 1's receive throws InternalError.
void expect_mismatch(size_t expected, size_t sent, SinkKind kind) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  auto out = make_message(3, sent);
  SendRequest send{out.data(), sent};
  TestSink sink(kind, expected);
  RecvRequest recv{expected, &sink};
  mesh.conn(0, 1)->post_send(&send);
  mesh.conn(1, 0)->post_recv(&recv);
  try {
    mesh.drive_all([&] { return recv.complete; }, std::chrono::seconds(5));
    ADD_FAILURE() << "no error for " << sent << " bytes sent to a receive of " << expected;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInternalError) << e.what();
    EXPECT_NE(std::string(e.what()).find("message size mismatch"), std::string::npos) << e.what();
    EXPECT_EQ(e.culprit(), 0);
  }
  EXPECT_FALSE(recv.complete);
  // The failed connection keeps throwing while its receive is pending.
  EXPECT_THROW(mesh.conn(1, 0)->progress(), Error);
}

TEST_P(UcxData, SizeMismatchSmall) {
  expect_mismatch(1000, 1001, SinkKind::Copy);
  expect_mismatch(1000, 999, SinkKind::Direct);
  expect_mismatch(0, 5, SinkKind::Copy);
  expect_mismatch(64, 0, SinkKind::AlignCheck);
}

TEST_P(UcxData, SizeMismatchChunked) {
  expect_mismatch((3 << 20) + 64, 3 << 20, SinkKind::Direct);
  expect_mismatch(3 << 20, (3 << 20) + 64, SinkKind::Copy);
  expect_mismatch(ucx::kChunkBytes, ucx::kChunkBytes + 1, SinkKind::AlignCheck);
  expect_mismatch(ucx::kChunkBytes + 1, ucx::kChunkBytes, SinkKind::Direct);
}

TEST_P(UcxData, WaitIsBoundedAndInterruptWakesIt) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  Transport& t = *mesh.transports[0];
  auto start = Clock::now();
  t.wait(milliseconds(150));
  auto took = Clock::now() - start;
  EXPECT_LT(took, milliseconds(1000));
  // Idle, it sleeps: early returns (UCX's keepalive every 250 ms progresses the worker) are
  // few, not a spin. Measured: 13 returns of wait(100 ms) in a second.
  int returns = 0;
  start = Clock::now();
  while (Clock::now() - start < milliseconds(500)) {
    t.wait(milliseconds(100));
    ++returns;
  }
  EXPECT_LT(returns, 25);

  // Pending receive, nothing sent: wait() still returns by its timeout.
  TestSink sink(SinkKind::Copy, 10);
  RecvRequest recv{10, &sink};
  mesh.conn(0, 1)->post_recv(&recv);
  start = Clock::now();
  t.wait(milliseconds(120));
  EXPECT_LT(Clock::now() - start, milliseconds(1000));

  std::thread waker([&] {
    std::this_thread::sleep_for(milliseconds(50));
    t.interrupt();
  });
  start = Clock::now();
  t.wait(std::chrono::seconds(10));
  took = Clock::now() - start;
  waker.join();
  EXPECT_LT(took, milliseconds(2000));

  // And a message arriving wakes it too.
  std::vector<std::byte> out = make_message(5, 10);
  SendRequest send{out.data(), 10};
  mesh.conn(1, 0)->post_send(&send);
  for (int i = 0; i < 100 && !send.complete; ++i) mesh.conn(1, 0)->progress();
  start = Clock::now();
  drive(
      t, {mesh.conn(0, 1)}, [&] { return recv.complete; }, milliseconds(5000));
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_EQ(first_mismatch(sink.data, 5), -1);
}

TEST_P(UcxData, AbortFlagEndsWait) {
  use_tls(GetParam());
  InMemoryStore store;
  AbortFlag abort{false};
  const std::string tag = unique_tag("abort");
  std::unique_ptr<Transport> t0, t1;
  run_ranks(2, [&](int rank) {
    SetupContext ctx = make_context(rank, 2, tag, &store, std::chrono::seconds(10), &abort);
    auto t = make_ucx_transport(ctx);
    int peer = 1 - rank;
    t->connect(ctx, std::span<const int>(&peer, 1));
    (rank == 0 ? t0 : t1) = std::move(t);
  });
  ASSERT_TRUE(t0 && t1);
  abort = true;
  const auto start = Clock::now();
  t0->wait(std::chrono::seconds(10));
  EXPECT_LT(Clock::now() - start, milliseconds(500));
}

TEST_P(UcxData, ConnectRejectsBadPeers) {
  InMemoryStore store;
  SetupContext ctx = make_context(0, 3, unique_tag("bad"), &store);
  auto t = make_ucx_transport(ctx);
  EXPECT_STREQ(t->name(), "ucx");
  const int self[] = {0};
  EXPECT_THROW(t->connect(ctx, self), Error);
  const int twice[] = {1, 1};
  EXPECT_THROW(t->connect(ctx, twice), Error);
  SetupContext other = ctx;
  other.comm_tag += "x";
  const int one[] = {1};
  EXPECT_THROW(t->connect(other, one), Error);
  // A peer that never publishes: Timeout at the deadline.
  SetupContext soon = ctx;
  soon.deadline = Deadline::after(milliseconds(100));
  try {
    t->connect(soon, one);
    ADD_FAILURE() << "connected to nobody";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout) << e.what();
  }
}

// UCX_TLS without a transport that carries error-handling endpoints: connect() fails at once
// (no hang until the deadline), saying which peer it could not reach.
TEST(UcxSetup, UnusableTlsFailsConnect) {
  use_tls("posix,sysv,cma");
  InMemoryStore store;
  const std::string tag = unique_tag("unusable");
  std::vector<std::string> errors(2);
  std::vector<std::unique_ptr<Transport>> transports(2);
  run_ranks(2, [&](int rank) {
    SetupContext ctx = make_context(rank, 2, tag, &store, std::chrono::seconds(5));
    transports[rank] = make_ucx_transport(ctx);
    const int peer = 1 - rank;
    const auto start = Clock::now();
    try {
      transports[rank]->connect(ctx, std::span<const int>(&peer, 1));
    } catch (const Error& e) {
      errors[rank] = e.what();
      EXPECT_EQ(e.culprit(), peer);
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(errors[rank].find("endpoint to rank " + std::to_string(1 - rank)), std::string::npos)
        << errors[rank];
  }
  unsetenv("UCX_TLS");
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxData, ::testing::Values(kTcpOnly, kDefaultTls),
                         [](const auto& info) { return tls_name(info.param); });

}  // namespace
}  // namespace ccl::transport::ucx_test
