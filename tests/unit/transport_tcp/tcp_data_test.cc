// Data movement over loopback between ranks on threads: sizes around the frame and piece
// boundaries and the chunk thresholds of several sockets, every sink kind, both directions at
// once, ordering and late receives; each under every socket configuration of kSocketConfigs.
#include <gtest/gtest.h>

#include <optional>
#include <tuple>

#include "tcp_test_util.h"
#include "transport/tcp/tcp_chunks.h"

namespace ccl::transport::tcp_test {
namespace {

using tcp::kSplitBytes;

class TcpSizes : public ::testing::TestWithParam<std::tuple<size_t, SinkKind, SocketConfig>> {
 protected:
  void SetUp() override {
    use_loopback();
    config_.emplace(std::get<2>(GetParam()));
  }
  void TearDown() override { config_.reset(); }
  std::optional<ScopedSocketConfig> config_;
};

// Runs each test under every socket configuration.
class TcpSockets : public SocketConfigTest {};

std::string config_name(const ::testing::TestParamInfo<SocketConfig>& info) {
  return info.param.name();
}

// Both ranks send one message to each other at the same time and check what arrived.
TEST_P(TcpSizes, BothWaysAtOnce) {
  const auto [bytes, kind, config] = GetParam();
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("sizes"));
  run_ranks(2, [&, bytes = bytes, kind = kind](int rank) {
    int peer = 1 - rank;
    Connection* c = mesh.conns[rank][peer];
    auto out = make_message(static_cast<uint32_t>(rank) + 1, bytes);
    SendRequest send{out.data(), bytes};
    TestSink sink(kind, bytes);
    RecvRequest recv{bytes, &sink};
    c->post_recv(&recv);
    c->post_send(&send);
    EXPECT_TRUE(c->busy());
    drive(*mesh.transports[rank], {c}, [&] { return send.complete && recv.complete; });
    EXPECT_TRUE(send.complete);
    EXPECT_TRUE(recv.complete);
    EXPECT_EQ(send.done_bytes, bytes);
    EXPECT_EQ(recv.done_bytes, bytes);
    EXPECT_FALSE(c->busy());
    EXPECT_EQ(first_mismatch(sink.data, static_cast<uint32_t>(peer) + 1), -1);
    EXPECT_TRUE(sink.errors.empty()) << sink.errors.front();
    if (kind == SinkKind::Direct) {
      EXPECT_EQ(sink.pieces, 0u);
    }
  });
}

// Sizes around the frame and piece boundaries, around the split threshold of several sockets
// (kSplitBytes - 1 goes whole on socket 0, kSplitBytes as two chunks), odd sizes whose last
// chunk takes an unaligned remainder, and a message of many chunks.
INSTANTIATE_TEST_SUITE_P(
    Tcp, TcpSizes,
    ::testing::Combine(::testing::Values(size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65},
                                         size_t{4095}, kSplitBytes - 1, kSplitBytes,
                                         kSplitBytes + 1, size_t{333333}, size_t{(1 << 20) + 7},
                                         size_t{16 << 20}),
                       ::testing::Values(SinkKind::Copy, SinkKind::AlignCheck, SinkKind::Direct),
                       ::testing::ValuesIn(kSocketConfigs)),
    [](const auto& info) {
      return std::to_string(std::get<0>(info.param)) + "_" + sink_name(std::get<1>(info.param)) +
             "_" + std::get<2>(info.param).name();
    });

// Four ranks, every ordered pair exchanging a message of its own size and sink kind at once.
TEST_P(TcpSockets, FourRanksAllPairs) {
  InMemoryStore store;
  const int n = 4;
  Mesh mesh = Mesh::make(n, store, unique_tag("all-pairs"));
  auto size_of = [](int src, int dst) { return size_t(1000) * (src * 4 + dst) * 37 + src; };
  auto seed_of = [](int src, int dst) { return static_cast<uint32_t>(src * 16 + dst + 1); };
  run_ranks(n, [&](int rank) {
    std::vector<std::vector<std::byte>> outs(n);
    std::vector<SendRequest> sends(n);
    std::vector<std::unique_ptr<TestSink>> sinks(n);
    std::vector<RecvRequest> recvs(n);
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      outs[p] = make_message(seed_of(rank, p), size_of(rank, p));
      sends[p] = SendRequest{outs[p].data(), outs[p].size()};
      sinks[p] =
          std::make_unique<TestSink>(static_cast<SinkKind>((rank + p) % 3), size_of(p, rank));
      recvs[p] = RecvRequest{size_of(p, rank), sinks[p].get()};
      mesh.conns[rank][p]->post_recv(&recvs[p]);
      mesh.conns[rank][p]->post_send(&sends[p]);
    }
    drive(*mesh.transports[rank], mesh.peers_of(rank), [&] {
      for (int p = 0; p < n; ++p) {
        if (p != rank && !(sends[p].complete && recvs[p].complete)) return false;
      }
      return true;
    });
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      EXPECT_EQ(first_mismatch(sinks[p]->data, seed_of(p, rank)), -1) << p << "->" << rank;
      EXPECT_TRUE(sinks[p]->errors.empty());
    }
  });
}

// Many messages of mixed sizes (zeros included) posted at once, both directions: each arrives
// whole, in order, and no receive completes before an earlier one.
void many_messages_keep_order(int count, const std::function<size_t(int)>& size_of) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("order"));
  run_ranks(2, [&](int rank) {
    Connection* c = mesh.conns[rank][1 - rank];
    std::vector<std::vector<std::byte>> outs(count);
    std::vector<SendRequest> sends(count);
    std::vector<std::unique_ptr<TestSink>> sinks(count);
    std::vector<RecvRequest> recvs(count);
    for (int i = 0; i < count; ++i) {
      outs[i] = make_message(static_cast<uint32_t>(rank * count + i), size_of(i));
      sends[i] = SendRequest{outs[i].data(), outs[i].size()};
      sinks[i] = std::make_unique<TestSink>(static_cast<SinkKind>(i % 3), size_of(i));
      recvs[i] = RecvRequest{size_of(i), sinks[i].get()};
      c->post_recv(&recvs[i]);
      c->post_send(&sends[i]);
    }
    bool in_order = true;
    drive(*mesh.transports[rank], {c}, [&] {
      bool seen_incomplete_recv = false, seen_incomplete_send = false;
      for (int i = 0; i < count; ++i) {
        if (recvs[i].complete && seen_incomplete_recv) in_order = false;
        if (sends[i].complete && seen_incomplete_send) in_order = false;
        seen_incomplete_recv |= !recvs[i].complete;
        seen_incomplete_send |= !sends[i].complete;
      }
      return !seen_incomplete_recv && !seen_incomplete_send;
    });
    EXPECT_TRUE(in_order);
    int peer = 1 - rank;
    for (int i = 0; i < count; ++i) {
      ASSERT_EQ(first_mismatch(sinks[i]->data, static_cast<uint32_t>(peer * count + i)), -1) << i;
      ASSERT_TRUE(sinks[i]->errors.empty()) << i;
    }
  });
}

// Hundreds of small messages.
TEST_P(TcpSockets, ManyMessagesKeepOrder) {
  many_messages_keep_order(400, [](int i) { return size_t(i % 7 == 0 ? 0 : (i * 977) % 20000); });
}

// Small and split messages interleaved (zeros, sizes around the threshold, several chunks): a
// small one behind a split one on socket 0, and chunks of consecutive messages on each socket.
TEST_P(TcpSockets, ManySplitMessagesKeepOrder) {
  many_messages_keep_order(60, [](int i) {
    switch (i % 6) {
      case 0:
        return size_t{0};
      case 1:
        return kSplitBytes - 1;
      case 2:
        return kSplitBytes;
      case 3:
        return size_t(i * 977 % 5000);
      case 4:
        return kSplitBytes + size_t(i * 7919 % 600000);
      default:
        return size_t(3 << 20) + size_t(i);
    }
  });
}

// Messages that arrive before any receive is posted wait in the kernel until it is.
TEST_P(TcpSockets, ReceivesPostedAfterTheDataArrived) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("late"));
  Connection* sender = mesh.conns[0][1];
  Connection* receiver = mesh.conns[1][0];
  // c is split over the sockets when there are several.
  auto a = make_message(5, 100), b = make_message(6, 0), c = make_message(7, 300000);
  SendRequest sa{a.data(), a.size()}, sb{b.data(), 0}, sc{c.data(), c.size()};
  sender->post_send(&sa);
  sender->post_send(&sb);
  sender->post_send(&sc);
  drive(*mesh.transports[0], {sender}, [&] { return sc.complete; });
  // Nothing was posted on the receiver: progress and wait must neither consume nor fail.
  EXPECT_FALSE(receiver->progress());
  mesh.transports[1]->wait(std::chrono::milliseconds(1));
  TestSink ka(SinkKind::AlignCheck, 100), kb(SinkKind::Copy, 0), kc(SinkKind::Direct, c.size());
  RecvRequest ra{100, &ka}, rb{0, &kb}, rc{c.size(), &kc};
  receiver->post_recv(&ra);
  receiver->post_recv(&rb);
  receiver->post_recv(&rc);
  drive(*mesh.transports[1], {receiver}, [&] { return rc.complete; });
  EXPECT_TRUE(ra.complete && rb.complete);
  EXPECT_EQ(first_mismatch(ka.data, 5), -1);
  EXPECT_EQ(first_mismatch(kc.data, 7), -1);
}

// A receive from any source takes only point-to-point messages: with a collective's message
// next from the peer, incoming() says no; once it is received, the point-to-point one behind it
// is reported, and still delivered in order.
TEST_P(TcpSockets, OnlyPointToPointMessagesAreIncoming) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("incoming"));
  Connection* sender = mesh.conns[0][1];
  Connection* receiver = mesh.conns[1][0];
  ASSERT_TRUE(receiver->can_probe());
  EXPECT_FALSE(receiver->incoming());
  auto a = make_message(8, 100), b = make_message(9, 300000);
  SendRequest sa{a.data(), a.size()}, sb{b.data(), b.size()};
  sb.point_to_point = true;
  sender->post_send(&sa);
  sender->post_send(&sb);
  drive(*mesh.transports[0], {sender}, [&] { return sa.complete; });
  for (int i = 0; i < 50; ++i) {
    mesh.transports[1]->wait(std::chrono::milliseconds(1));
    EXPECT_FALSE(receiver->incoming()) << "a collective's message was reported";
  }
  TestSink ka(SinkKind::Copy, 100);
  RecvRequest ra{100, &ka};
  receiver->post_recv(&ra);
  drive(*mesh.transports[1], {receiver}, [&] { return ra.complete; });
  bool seen = false;
  for (int i = 0; i < 5000 && !seen; ++i) {
    mesh.transports[0]->wait(std::chrono::microseconds(100));
    sender->progress();
    seen = receiver->incoming();
  }
  EXPECT_TRUE(seen) << "the point-to-point message behind it was not reported";
  TestSink kb(SinkKind::Direct, b.size());
  RecvRequest rb{b.size(), &kb};
  receiver->post_recv(&rb);
  EXPECT_FALSE(receiver->incoming());  // a receive is posted
  drive(*mesh.transports[1], {receiver}, [&] {
    sender->progress();
    return rb.complete;
  });
  EXPECT_EQ(first_mismatch(ka.data, 8), -1);
  EXPECT_EQ(first_mismatch(kb.data, 9), -1);
}

// connect() for a peer connected before returns the same connection and needs no handshake.
TEST_P(TcpSockets, ReconnectReturnsTheSameConnection) {
  InMemoryStore store;
  std::string tag = unique_tag("again");
  std::vector<std::unique_ptr<Transport>> transports(2);
  std::vector<Connection*> first(2), second(2);
  run_ranks(2, [&](int rank) {
    SetupContext ctx = make_context(rank, 2, tag, &store);
    transports[rank] = make_tcp_transport(ctx);
    int peer = 1 - rank;
    first[rank] = transports[rank]->connect(ctx, std::span<const int>(&peer, 1))[0];
    second[rank] = transports[rank]->connect(ctx, std::span<const int>(&peer, 1))[0];
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(first[r], second[r]);
    ASSERT_NE(first[r], nullptr);
    EXPECT_EQ(first[r]->peer(), 1 - r);
    EXPECT_STREQ(transports[r]->name(), "tcp");
  }
}

INSTANTIATE_TEST_SUITE_P(Tcp, TcpSockets, ::testing::ValuesIn(kSocketConfigs), config_name);

}  // namespace
}  // namespace ccl::transport::tcp_test
