// Several sockets per peer (tcp_multi_connection.h): the chunk layout, the variables' checks, the
// handshake between ranks that disagree, and failures over a multi-socket connection (size
// mismatch of a split message, a close after data, failure notices, a goodbye).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <optional>

#include "tcp_test_util.h"
#include "transport/failure_notice.h"
#include "transport/tcp/tcp_chunks.h"
#include "transport/tcp/tcp_multi_connection.h"

namespace ccl::transport::tcp_test {
namespace {

using std::chrono::milliseconds;
using tcp::chunk_layout;
using tcp::kMaxChunk;
using tcp::kMinChunk;
using tcp::kSplitBytes;

TEST(TcpChunks, SmallMessagesAreNotSplit) {
  for (size_t bytes : {size_t{0}, size_t{1}, kSplitBytes - 1}) {
    EXPECT_EQ(chunk_layout(bytes, 4, 0).count, 0u) << bytes;
  }
  EXPECT_EQ(chunk_layout(size_t{64} << 20, 1, 0).count, 0u);  // one socket: never split
}

// Every split message: chunks of at least kMinChunk starting at multiples of kPieceAlign, at most
// kMaxChunk but the last (which takes the remainder), covering the message exactly, and spread
// over every socket before any takes a second one.
TEST(TcpChunks, LayoutCoversTheMessage) {
  for (int n : {2, 3, 4, 7, 64}) {
    for (size_t bytes : {kSplitBytes, kSplitBytes + 1, size_t{333333}, size_t{(1 << 20) + 7},
                         size_t{64} << 20, (size_t{64} << 20) + 63}) {
      for (uint32_t seq : {0u, 1u, 5u}) {
        const auto l = chunk_layout(bytes, n, seq);
        SCOPED_TRACE(std::to_string(bytes) + " bytes over " + std::to_string(n));
        ASSERT_GE(l.count, 2u);
        size_t next = 0;
        std::vector<int> per_socket(n, 0);
        for (size_t k = 0; k < l.count; ++k) {
          EXPECT_EQ(l.offset_of(k), next);
          EXPECT_EQ(l.offset_of(k) % kPieceAlign, 0u);
          EXPECT_GE(l.length_of(k), kMinChunk);
          if (k + 1 < l.count) {
            EXPECT_LE(l.length_of(k), kMaxChunk);
          }
          next += l.length_of(k);
          ASSERT_GE(l.socket_of(k), 0);
          ASSERT_LT(l.socket_of(k), n);
          ++per_socket[l.socket_of(k)];
        }
        EXPECT_EQ(next, bytes);
        const auto [lo, hi] = std::minmax_element(per_socket.begin(), per_socket.end());
        EXPECT_LE(*hi - *lo, 1);
      }
    }
  }
  // The threshold itself: two chunks of 64 KiB, starting on the socket of the sequence number.
  const auto l = chunk_layout(kSplitBytes, 4, 6);
  EXPECT_EQ(l.count, 2u);
  EXPECT_EQ(l.chunk, kMinChunk);
  EXPECT_EQ(l.socket_of(0), 2);
  EXPECT_EQ(l.socket_of(1), 3);
  // Large messages: bytes / n, capped.
  EXPECT_EQ(chunk_layout(size_t{2} << 20, 4, 0).chunk, size_t{512} << 10);
  EXPECT_EQ(chunk_layout(size_t{64} << 20, 4, 0).chunk, kMaxChunk);
}

// Values below 1, above 64, a product above 64 and garbage are refused, naming the variable.
TEST(TcpSockets, BadVariableValuesAreRefused) {
  InMemoryStore store;
  struct Case {
    const char* threads;
    const char* per_thread;
    const char* named;
  };
  for (const Case& c :
       {Case{"1", "0", "CCL_NSOCKS_PERTHREAD"}, Case{"0", "1", "CCL_SOCKET_NTHREADS"},
        Case{"-2", "4", "CCL_SOCKET_NTHREADS"}, Case{"1", "65", "CCL_NSOCKS_PERTHREAD"},
        Case{"8", "9", "CCL_SOCKET_NTHREADS x CCL_NSOCKS_PERTHREAD"},
        Case{"1", "lots", "CCL_NSOCKS_PERTHREAD"}}) {
    setenv("CCL_SOCKET_NTHREADS", c.threads, 1);
    setenv("CCL_NSOCKS_PERTHREAD", c.per_thread, 1);
    expect_error([&] { make_tcp_transport(make_context(0, 2, unique_tag("bad"), &store)); },
                 cclInvalidUsage, c.named);
  }
  setenv("CCL_SOCKET_NTHREADS", "8", 1);
  setenv("CCL_NSOCKS_PERTHREAD", "8", 1);  // 64: the most
  EXPECT_NO_THROW(make_tcp_transport(make_context(0, 2, unique_tag("most"), &store)));
  unsetenv("CCL_SOCKET_NTHREADS");
  unsetenv("CCL_NSOCKS_PERTHREAD");
}

// Ranks whose counts differ fail their setup at once, both of them, saying what to set.
TEST(TcpSockets, RanksThatDisagreeOnTheCountFail) {
  use_loopback();
  InMemoryStore store;
  const std::string tag = unique_tag("disagree");
  std::vector<std::unique_ptr<Transport>> t(2);
  for (int rank = 0; rank < 2; ++rank) {  // each made under its own setting
    ScopedSocketConfig config(SocketConfig{1, rank == 0 ? 4 : 2});
    t[rank] = make_tcp_transport(make_context(rank, 2, tag, &store));
  }
  auto start = Clock::now();
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank) {
    SetupContext ctx = make_context(rank, 2, tag, &store, milliseconds(5000));
    int peer = 1 - rank;
    try {
      t[rank]->connect(ctx, std::span<const int>(&peer, 1));
      errors[rank] = "connected";
    } catch (const Error& e) {
      errors[rank] = std::to_string(e.code()) + " " + e.what();
    }
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(errors[rank].rfind(std::to_string(cclInvalidUsage) + " ", 0), 0u) << errors[rank];
    EXPECT_NE(errors[rank].find("CCL_NSOCKS_PERTHREAD"), std::string::npos) << errors[rank];
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

class TcpMultiFailure : public SocketConfigTest {};

// A split message of another size than posted: InternalError, nothing reaches a consume() sink.
TEST_P(TcpMultiFailure, SizeMismatchOfASplitMessage) {
  for (auto [sent, expected] :
       {std::pair{size_t{200000}, size_t{1} << 20}, std::pair{size_t{3} << 20, size_t{300000}},
        std::pair{size_t{500}, size_t{400000}}}) {
    InMemoryStore store;
    Mesh mesh = Mesh::make(2, store, unique_tag("mismatch"));
    auto out = make_message(1, sent);
    SendRequest send{out.data(), sent};
    mesh.conns[0][1]->post_send(&send);
    TestSink sink(SinkKind::Copy, expected);
    RecvRequest recv{expected, &sink};
    Connection* c = mesh.conns[1][0];
    c->post_recv(&recv);
    const std::string text = "message size mismatch with rank 0: expected " +
                             std::to_string(expected) + " bytes, peer sent " + std::to_string(sent);
    // The sender may stall once the receiver stops reading: it goes on until the receiver failed.
    std::atomic<bool> receiver_done{false};
    std::thread sender([&] {
      try {
        while (!send.complete && !receiver_done) {
          if (!mesh.conns[0][1]->progress()) mesh.transports[0]->wait(milliseconds(10));
        }
      } catch (const Error&) {
      }
    });
    expect_error([&] { drive_until_error(*mesh.transports[1], c); }, cclInternalError, text);
    receiver_done = true;
    sender.join();
    EXPECT_FALSE(recv.complete);
    EXPECT_EQ(sink.pieces, 0u);
    expect_error([&] { c->progress(); }, cclInternalError, text);
    expect_error([&] { mesh.transports[1]->wait(milliseconds(10)); }, cclInternalError, text);
  }
}

// Split messages sent before a clean close are delivered; a receive beyond them fails with the
// goodbye, within a second.
TEST_P(TcpMultiFailure, DataSentBeforeACloseIsDelivered) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("drain"));
  auto a = make_message(1, 5000), b = make_message(2, (1 << 20) + 3), c = make_message(3, 400000);
  {
    SendRequest sa{a.data(), a.size()}, sb{b.data(), b.size()}, sc{c.data(), c.size()};
    Connection* s = mesh.conns[1][0];
    s->post_send(&sa);
    s->post_send(&sb);
    s->post_send(&sc);
    drive(*mesh.transports[1], {s}, [&] { return sc.complete; });
    mesh.transports[1].reset();
  }
  Connection* r = mesh.conns[0][1];
  Transport& t = *mesh.transports[0];
  EXPECT_NO_THROW(t.wait(milliseconds(20)));
  TestSink ka(SinkKind::AlignCheck, a.size()), kb(SinkKind::AlignCheck, b.size()),
      kc(SinkKind::Direct, c.size());
  RecvRequest ra{a.size(), &ka}, rb{b.size(), &kb}, rc{c.size(), &kc};
  r->post_recv(&ra);
  r->post_recv(&rb);
  r->post_recv(&rc);
  drive(t, {r}, [&] { return rc.complete; });
  EXPECT_EQ(first_mismatch(ka.data, 1), -1);
  EXPECT_EQ(first_mismatch(kb.data, 2), -1);
  EXPECT_EQ(first_mismatch(kc.data, 3), -1);
  EXPECT_TRUE(ka.errors.empty() && kb.errors.empty());
  TestSink kd(SinkKind::Copy, 300000);  // split: it waits on every socket
  RecvRequest rd{300000, &kd};
  r->post_recv(&rd);
  auto start = Clock::now();
  expect_error(
      [&] {
        Deadline deadline = Deadline::after(milliseconds(2000));
        while (!deadline.expired()) {
          r->progress();
          t.wait(milliseconds(100));
        }
      },
      cclRemoteError, "destroyed its communicator");
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
}

// A failure notice reaches a peer that waits for a split message (on its sockets' wait), and an
// idle one's collect_notices and check_health see it.
TEST_P(TcpMultiFailure, FailureNoticesArrive) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(3, store, unique_tag("notice"));
  TestSink sink(SinkKind::Direct, 1 << 20);
  RecvRequest recv{1 << 20, &sink};
  mesh.conns[0][1]->post_recv(&recv);
  FailureNotice notice;
  notice.code = cclTimeout;
  notice.origin = 1;
  notice.culprit = 2;
  mesh.transports[1]->notify_failure(notice);
  auto start = Clock::now();
  try {
    drive_until_error(*mesh.transports[0], mesh.conns[0][1], milliseconds(2000));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout) << e.what();
    EXPECT_EQ(e.culprit(), 2) << e.what();
  }
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  std::vector<std::pair<int, FailureNotice>> seen;
  mesh.transports[2]->collect_notices(seen);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, 1);
  EXPECT_EQ(seen[0].second.culprit, 2);
  expect_error([&] { mesh.transports[2]->check_health(); }, cclTimeout, "");
}

// A helper socket of an idle connection hangs up, socket 0 does not: a failure notice that
// comes later on socket 0 still ends the idle peer's wait.
TEST_P(TcpMultiFailure, ANoticeAfterAHelperSocketHungUpEndsAnIdleWait) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("helper-hup"));
  auto* peer = dynamic_cast<tcp::MultiConnection*>(mesh.conns[1][0]);
  ASSERT_NE(peer, nullptr);
  ASSERT_GT(peer->nsockets(), 1);
  ::shutdown(peer->lane_fd(peer->nsockets() - 1), SHUT_WR);
  EXPECT_NO_THROW(mesh.transports[0]->wait(milliseconds(100)));  // sees the hang-up
  FailureNotice notice;
  notice.code = cclSystemError;
  notice.origin = 1;
  mesh.transports[1]->notify_failure(notice);
  const auto start = Clock::now();
  expect_error([&] { mesh.transports[0]->wait(milliseconds(2000)); }, cclRemoteError,
               "rank 1 failed");
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
}

// With many sockets per pair, the sockets of two ranks connecting at once all get in (the cap on
// connections without a hello does not evict them).
TEST(TcpSockets, SixteenSocketsPerPairConnectThreeRanks) {
  use_loopback();
  ScopedSocketConfig config(SocketConfig{1, 16});
  // A descriptor limit whose cap on hello-less connections (limit / 16) is below the 32 sockets
  // rank 0 accepts from ranks 1 and 2.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 320);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  InMemoryStore store;
  Mesh mesh = Mesh::make(3, store, unique_tag("sixteen"));
  setrlimit(RLIMIT_NOFILE, &saved);
  for (int r = 0; r < 3; ++r) {
    for (int p = 0; p < 3; ++p) {
      if (p != r) {
        EXPECT_NE(mesh.conns[r][p], nullptr);
      }
    }
  }
  auto out = make_message(7, 1 << 20);
  TestSink sink(SinkKind::Copy, out.size());
  SendRequest send{out.data(), out.size()};
  RecvRequest recv{out.size(), &sink};
  mesh.conns[2][0]->post_send(&send);
  mesh.conns[0][2]->post_recv(&recv);
  run_ranks(2, [&](int i) {
    if (i == 0) {
      drive(*mesh.transports[2], {mesh.conns[2][0]}, [&] { return send.complete; });
    } else {
      drive(*mesh.transports[0], {mesh.conns[0][2]}, [&] { return recv.complete; });
    }
  });
  EXPECT_EQ(first_mismatch(sink.data, 7), -1);
}

INSTANTIATE_TEST_SUITE_P(Tcp, TcpMultiFailure,
                         ::testing::Values(SocketConfig{1, 4}, SocketConfig{2, 2}),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace ccl::transport::tcp_test
