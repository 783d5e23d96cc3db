// Strangers on a rank's listener while its connection setup runs: a hello that knows the
// communicator's tag but not the listener's token, garbage, half hellos, a slow trickle and a
// flood of held connections. Each must be dropped within the hello timeout while the real ranks
// connect, and the connections they get must work.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/random.h>

#include <cstdio>

#include "core/bootstrap/socket.h"
#include "tcp_test_util.h"
#include "transport/tcp/tcp_handshake.h"
#include "transport/tcp/tcp_wire.h"

namespace ccl::transport::tcp_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kSlack = seconds(4);  // scheduling room on a loaded machine

// True once the listener has closed `s` (EOF or reset), false if it is open at the deadline.
bool dropped(Socket& s, Deadline deadline) {
  for (;;) {
    char buf[64];
    ssize_t n = ::recv(s.fd(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    if (n > 0) return false;  // an answer: it was taken for a rank
    if (deadline.expired()) return false;
    pollfd p{s.fd(), POLLIN | POLLRDHUP, 0};
    ::poll(&p, 1, static_cast<int>(deadline.remaining(milliseconds(100)).count() / 1000 + 1));
  }
}

void send_some(Socket& s, const void* data, size_t bytes) {
  [[maybe_unused]] ssize_t n = ::send(s.fd(), data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
}

Secret random_token() {
  Secret t{};
  [[maybe_unused]] ssize_t n = getrandom(t.data(), t.size(), 0);
  return t;
}

tcp::Hello hello_for(int rank, int nranks, const std::string& tag, const Secret& token) {
  tcp::Hello h{tcp::kHelloMagic,
               tcp::kHelloVersion,
               tcp::kHelloKindHello,
               rank,
               nranks,
               tcp::tag_hash(tag),
               {}};
  std::memcpy(h.token, token.data(), sizeof(h.token));
  return h;
}

// One small message each way: the connection really works.
void ping(Transport& t0, Connection* c0, Transport& t1, Connection* c1) {
  auto a = make_message(21, 1000), b = make_message(22, 77);
  run_ranks(2, [&](int rank) {
    Transport& t = rank == 0 ? t0 : t1;
    Connection* c = rank == 0 ? c0 : c1;
    SendRequest send{rank == 0 ? a.data() : b.data(), rank == 0 ? a.size() : b.size()};
    TestSink sink(SinkKind::Copy, rank == 0 ? b.size() : a.size());
    RecvRequest recv{sink.data.size(), &sink};
    c->post_send(&send);
    c->post_recv(&recv);
    drive(t, {c}, [&] { return send.complete && recv.complete; });
    EXPECT_EQ(first_mismatch(sink.data, rank == 0 ? 22 : 21), -1);
  });
}

tcp::Handshake::Published published(InMemoryStore& store, const std::string& tag, int rank) {
  return tcp::Handshake::decode_published(to_string(
      store.get(tcp::Handshake::address_key(tag, rank), Deadline::after(milliseconds(10000)))));
}

// The comm tag is no secret (shared-memory segment names carry it): a stranger that knows it, but
// not the token published through the store, must not be taken for a rank, nor keep the real rank
// out by claiming its place first.
TEST(TcpHostile, AHelloWithoutTheListenersTokenIsRefused) {
  use_loopback();
  InMemoryStore store;
  const std::string tag = unique_tag("impostor");
  std::unique_ptr<Transport> t0, t1;
  Connection *c0 = nullptr, *c1 = nullptr;
  std::thread rank0([&] {
    SetupContext ctx = make_context(0, 2, tag, &store, seconds(20));
    t0 = make_tcp_transport(ctx);
    int peer = 1;
    EXPECT_NO_THROW(c0 = t0->connect(ctx, std::span<const int>(&peer, 1))[0]);
  });
  const auto pub = published(store, tag, 0);
  const SocketAddress address = SocketAddress::parse(pub.address);
  Secret near = pub.token;
  near[15] ^= 0x01;  // one bit off
  int tried = 0, effects = 0;
  for (const Secret& token : {Secret{}, random_token(), near}) {
    Socket impostor = Socket::connect(address, Deadline::after(seconds(5)));
    tcp::Hello h = hello_for(1, 2, tag, token);
    send_some(impostor, &h, sizeof(h));
    ++tried;
    if (!dropped(impostor, Deadline::after(seconds(5)))) {
      ADD_FAILURE() << "a hello without the listener's token was answered or kept";
      ++effects;
    }
  }
  std::thread rank1([&] {
    SetupContext ctx = make_context(1, 2, tag, &store, seconds(20));
    t1 = make_tcp_transport(ctx);
    int peer = 0;
    EXPECT_NO_THROW(c1 = t1->connect(ctx, std::span<const int>(&peer, 1))[0]);
  });
  rank0.join();
  rank1.join();
  ASSERT_TRUE(c0 != nullptr && c1 != nullptr);
  ping(*t0, c0, *t1, c1);
  effects += ::testing::Test::HasFailure() ? 1 : 0;
  printf("hostile connections tried: %d, effects: %d\n", tried, effects);
}

// Rank 0 waits for ranks 1 and 2; rank 1 comes during the attack, rank 2 only once every stranger
// should have been dropped, so that rank 0's setup is still running to drop them.
TEST(TcpHostile, StrangersAreDroppedWhileSetupRuns) {
  use_loopback();
  InMemoryStore store;
  const std::string tag = unique_tag("hostile");
  constexpr int kFlood = 300;  // more than max_incoming(): the oldest must make room
  std::vector<std::unique_ptr<Transport>> t(3);
  std::vector<Connection*> c(4, nullptr);  // 0-1, 0-2, 1-0, 2-0
  std::thread rank0([&] {
    SetupContext ctx = make_context(0, 3, tag, &store, seconds(40));
    t[0] = make_tcp_transport(ctx);
    std::vector<int> peers{1, 2};
    try {
      auto conns = t[0]->connect(ctx, peers);
      c[0] = conns[0];
      c[1] = conns[1];
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank 0: " << e.what();
    }
  });
  auto join_as = [&](int rank, Connection** out) {
    return std::thread([&, rank, out] {
      SetupContext ctx = make_context(rank, 3, tag, &store, seconds(30));
      t[rank] = make_tcp_transport(ctx);
      int peer = 0;
      try {
        *out = t[rank]->connect(ctx, std::span<const int>(&peer, 1))[0];
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << ": " << e.what();
      }
    });
  };
  const auto pub = published(store, tag, 0);
  const SocketAddress address = SocketAddress::parse(pub.address);
  auto open = [&] { return Socket::connect(address, Deadline::after(seconds(5))); };

  struct Stranger {
    const char* kind;
    Socket socket;
  };
  std::vector<Stranger> strangers;
  for (int i = 0; i < kFlood; ++i) strangers.push_back({"flood", open()});
  std::thread rank1 = join_as(1, &c[2]);  // during the attack
  const Deadline trickle_deadline = Deadline::after(tcp::Handshake::kHelloTimeout + kSlack);
  std::atomic<bool> trickle_dropped{false};
  std::thread trickle([&] {
    Socket s = open();
    tcp::Hello h = hello_for(2, 3, tag, random_token());
    const auto* bytes = reinterpret_cast<const uint8_t*>(&h);
    for (size_t i = 0; i < sizeof(h) && !trickle_deadline.expired(); ++i) {
      if (::send(s.fd(), bytes + i, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN) {
        trickle_dropped = true;
        return;
      }
      if (dropped(s, Deadline::after(milliseconds(1000)))) {
        trickle_dropped = true;
        return;
      }
    }
    trickle_dropped = dropped(s, trickle_deadline);
  });
  for (size_t n : {1, 3, 100, 4096}) {
    Stranger s{"garbage", open()};
    std::vector<uint8_t> junk(n, 0x5a);
    send_some(s.socket, junk.data(), junk.size());
    strangers.push_back(std::move(s));
  }
  for (size_t cut : {4, 16, 39}) {
    Stranger s{"half a hello", open()};
    tcp::Hello h = hello_for(2, 3, tag, pub.token);  // the right token, but never whole
    send_some(s.socket, &h, cut);
    strangers.push_back(std::move(s));
  }
  {
    Stranger s{"wrong token", open()};
    tcp::Hello h = hello_for(2, 3, tag, random_token());
    send_some(s.socket, &h, sizeof(h));
    strangers.push_back(std::move(s));
    Stranger a{"an ack instead of a hello", open()};
    h = hello_for(2, 3, tag, pub.token);
    h.kind = tcp::kHelloKindAck;
    send_some(a.socket, &h, sizeof(h));
    strangers.push_back(std::move(a));
  }
  const Deadline drop_deadline = Deadline::after(tcp::Handshake::kHelloTimeout + kSlack);
  int effects = 0;
  for (auto& s : strangers) {
    if (!dropped(s.socket, drop_deadline)) {
      ADD_FAILURE() << "a stranger (" << s.kind << ") was not dropped within the hello timeout";
      ++effects;
    }
  }
  trickle.join();
  if (!trickle_dropped) {
    ADD_FAILURE() << "a slow trickle outlived its hello timeout";
    ++effects;
  }
  rank1.join();
  std::thread rank2 = join_as(2, &c[3]);
  rank2.join();
  rank0.join();
  ASSERT_TRUE(c[0] && c[1] && c[2] && c[3]);
  EXPECT_EQ(c[0]->peer(), 1);
  EXPECT_EQ(c[1]->peer(), 2);
  ping(*t[0], c[0], *t[1], c[2]);
  ping(*t[0], c[1], *t[2], c[3]);
  effects += ::testing::Test::HasFailure() ? 1 : 0;
  printf("hostile connections tried: %zu, effects: %d\n", strangers.size() + 1, effects);
}

}  // namespace
}  // namespace ccl::transport::tcp_test
