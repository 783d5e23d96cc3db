// Connection setup: strangers on the listener, timeouts, abort, another communicator's hello and
// connect() calls whose peer lists differ between ranks.
#include <gtest/gtest.h>

#include "core/bootstrap/socket.h"
#include "tcp_test_util.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_wire.h"

namespace ccl::transport::tcp_test {
namespace {

using std::chrono::milliseconds;

// Sends one small message each way over freshly connected pairs: the connection really works.
void ping(Transport& t0, Connection* c0, Transport& t1, Connection* c1) {
  auto a = make_message(11, 333), b = make_message(12, 65);
  run_ranks(2, [&](int rank) {
    Transport& t = rank == 0 ? t0 : t1;
    Connection* c = rank == 0 ? c0 : c1;
    auto& out = rank == 0 ? a : b;
    SendRequest send{out.data(), out.size()};
    TestSink sink(SinkKind::Copy, rank == 0 ? b.size() : a.size());
    RecvRequest recv{sink.data.size(), &sink};
    c->post_send(&send);
    c->post_recv(&recv);
    drive(t, {c}, [&] { return send.complete && recv.complete; });
    EXPECT_EQ(first_mismatch(sink.data, rank == 0 ? 12 : 11), -1);
  });
}

// True if the listener closed this socket (what it does to a connection it refuses).
bool closed_by_peer(Socket& s) {
  try {
    char byte;
    s.recv_all(&byte, 1, Deadline::after(std::chrono::seconds(5)));
  } catch (const Error& e) {
    return e.code() == cclRemoteError;
  }
  return false;
}

TEST(TcpSetup, StrangersOnTheListenerAreDropped) {
  use_loopback();
  InMemoryStore store;
  std::string tag = unique_tag("strangers");
  std::unique_ptr<Transport> t0, t1;
  Connection *c0 = nullptr, *c1 = nullptr;
  std::thread rank0([&] {
    SetupContext ctx = make_context(0, 2, tag, &store);
    t0 = make_tcp_transport(ctx);
    int peer = 1;
    EXPECT_NO_THROW(c0 = t0->connect(ctx, std::span<const int>(&peer, 1))[0]);
  });
  auto address = SocketAddress::parse(
      tcp::Handshake::decode_published(to_string(store.get(tcp::Handshake::address_key(tag, 0),
                                                           Deadline::after(milliseconds(5000)))))
          .address);
  auto deadline = Deadline::after(milliseconds(5000));
  Socket silent = Socket::connect(address, deadline);  // never says anything
  Socket garbage = Socket::connect(address, deadline);
  std::vector<char> junk(100, '\x5a');
  garbage.send_all(junk.data(), junk.size(), deadline);
  Socket other_comm = Socket::connect(address, deadline);
  tcp::Hello hello{tcp::kHelloMagic,
                   tcp::kHelloVersion,
                   tcp::kHelloKindHello,
                   1,
                   2,
                   tcp::tag_hash("some other communicator"),
                   {}};
  other_comm.send_all(&hello, sizeof(hello), deadline);
  Socket bad_rank = Socket::connect(address, deadline);
  hello = tcp::Hello{
      tcp::kHelloMagic, tcp::kHelloVersion, tcp::kHelloKindHello, 7, 2, tcp::tag_hash(tag), {}};
  bad_rank.send_all(&hello, sizeof(hello), deadline);
  Socket half = Socket::connect(address, deadline);
  half.send_all(junk.data(), 10, deadline);
  half.close();  // leaves before a whole hello

  EXPECT_TRUE(closed_by_peer(garbage));
  EXPECT_TRUE(closed_by_peer(other_comm));
  EXPECT_TRUE(closed_by_peer(bad_rank));

  std::thread rank1([&] {
    SetupContext ctx = make_context(1, 2, tag, &store);
    t1 = make_tcp_transport(ctx);
    int peer = 0;
    EXPECT_NO_THROW(c1 = t1->connect(ctx, std::span<const int>(&peer, 1))[0]);
  });
  rank0.join();
  rank1.join();
  ASSERT_TRUE(c0 != nullptr && c1 != nullptr);
  ping(*t0, c0, *t1, c1);
}

TEST(TcpSetup, LowerRankTimesOutWithoutItsPeer) {
  use_loopback();
  InMemoryStore store;
  std::string tag = unique_tag("timeout");
  SetupContext ctx = make_context(0, 3, tag, &store, milliseconds(300));
  auto t = make_tcp_transport(ctx);
  std::vector<int> peers{2, 1};
  auto start = Clock::now();
  try {
    t->connect(ctx, peers);
    FAIL() << "connect() returned without peers";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout);
    EXPECT_NE(std::string(e.what()).find("[1 2]"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST(TcpSetup, HigherRankTimesOutWithoutItsPeer) {
  use_loopback();
  InMemoryStore store;
  SetupContext ctx = make_context(1, 2, unique_tag("timeout-high"), &store, milliseconds(300));
  auto t = make_tcp_transport(ctx);
  int peer = 0;
  try {
    t->connect(ctx, std::span<const int>(&peer, 1));
    FAIL() << "connect() returned without a peer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout);
  }
}

TEST(TcpSetup, AbortStopsSetup) {
  use_loopback();
  InMemoryStore store;
  AbortFlag abort{false};
  SetupContext ctx = make_context(0, 2, unique_tag("abort"), &store, milliseconds(20000), &abort);
  auto t = make_tcp_transport(ctx);
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    abort = true;
  });
  auto start = Clock::now();
  int peer = 1;
  try {
    t->connect(ctx, std::span<const int>(&peer, 1));
    ADD_FAILURE() << "connect() returned without a peer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclRemoteError);
  }
  aborter.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(TcpSetup, InvalidPeerListsAreRejected) {
  use_loopback();
  InMemoryStore store;
  SetupContext ctx = make_context(1, 3, unique_tag("invalid"), &store);
  auto t = make_tcp_transport(ctx);
  for (std::vector<int> peers : {std::vector<int>{1}, {3}, {-1}, {0, 0}}) {
    try {
      t->connect(ctx, peers);
      ADD_FAILURE() << "accepted a bad peer list";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInvalidArgument);
    }
  }
  EXPECT_THROW(make_tcp_transport(make_context(3, 3, "x", &store)), Error);
}

// A rank of another communicator that finds our address (here: copied into its store) is refused
// with a clear error, and our own setup is not disturbed.
TEST(TcpSetup, HelloForAnotherCommunicatorIsRefused) {
  use_loopback();
  InMemoryStore store;
  std::string tag = unique_tag("comm-a");
  std::string other = unique_tag("comm-b");
  std::unique_ptr<Transport> t0, t1;
  Connection *c0 = nullptr, *c1 = nullptr;
  std::thread rank0([&] {
    SetupContext ctx = make_context(0, 2, tag, &store);
    t0 = make_tcp_transport(ctx);
    int peer = 1;
    EXPECT_NO_THROW(c0 = t0->connect(ctx, std::span<const int>(&peer, 1))[0]);
  });
  Bytes address =
      store.get(tcp::Handshake::address_key(tag, 0), Deadline::after(milliseconds(5000)));
  store.set(tcp::Handshake::address_key(other, 0), address);
  {
    SetupContext ctx = make_context(1, 2, other, &store, milliseconds(5000));
    auto stranger = make_tcp_transport(ctx);
    int peer = 0;
    try {
      stranger->connect(ctx, std::span<const int>(&peer, 1));
      ADD_FAILURE() << "connected to another communicator";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclRemoteError);
      EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
    }
  }
  SetupContext ctx = make_context(1, 2, tag, &store);
  t1 = make_tcp_transport(ctx);
  int peer = 0;
  EXPECT_NO_THROW(c1 = t1->connect(ctx, std::span<const int>(&peer, 1))[0]);
  rank0.join();
  ASSERT_TRUE(c0 != nullptr && c1 != nullptr);
  ping(*t0, c0, *t1, c1);
}

// Rank 0 connects to 1 and then to 2, while 2 connects to 0 at once and 1 comes late: 2's hello
// arrives during 0's first call and must be kept for the second.
TEST(TcpSetup, ConnectCallsWithDifferentPeerLists) {
  use_loopback();
  InMemoryStore store;
  std::string tag = unique_tag("staged");
  std::vector<std::unique_ptr<Transport>> t(3);
  Connection *c01 = nullptr, *c02 = nullptr, *c10 = nullptr, *c20 = nullptr;
  run_ranks(3, [&](int rank) {
    SetupContext ctx = make_context(rank, 3, tag, &store);
    t[rank] = make_tcp_transport(ctx);
    if (rank == 0) {
      int one = 1, two = 2;
      c01 = t[0]->connect(ctx, std::span<const int>(&one, 1))[0];
      c02 = t[0]->connect(ctx, std::span<const int>(&two, 1))[0];
    } else if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(200));
      int zero = 0;
      c10 = t[1]->connect(ctx, std::span<const int>(&zero, 1))[0];
    } else {
      int zero = 0;
      c20 = t[2]->connect(ctx, std::span<const int>(&zero, 1))[0];
    }
  });
  ASSERT_TRUE(c01 && c02 && c10 && c20);
  EXPECT_EQ(c01->peer(), 1);
  EXPECT_EQ(c02->peer(), 2);
  ping(*t[0], c01, *t[1], c10);
  ping(*t[0], c02, *t[2], c20);
}

}  // namespace
}  // namespace ccl::transport::tcp_test
