// SocketAddress parsing and Socket's deadline, abort and peer-failure behaviour on loopback.
#include "core/bootstrap/socket.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "base/error.h"

namespace ccl {
namespace {

using std::chrono::milliseconds;

cclResult_t code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return cclSuccess;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(SocketAddress, ParsesIpv4) {
  auto a = SocketAddress::parse("1.2.3.4:5678");
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 5678);
  EXPECT_EQ(a.host(), "1.2.3.4");
  EXPECT_EQ(a.to_string(), "1.2.3.4:5678");
  EXPECT_EQ(a.length, sizeof(sockaddr_in));
}

TEST(SocketAddress, ParsesIpv6InBrackets) {
  auto a = SocketAddress::parse("[::1]:80");
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.port(), 80);
  EXPECT_EQ(a.host(), "::1");
  EXPECT_EQ(a.to_string(), "[::1]:80");
  auto b = SocketAddress::parse("[fd00:0:0::2]:65535");
  EXPECT_EQ(b.to_string(), "[fd00::2]:65535");
}

TEST(SocketAddress, ResolvesHostnames) {
  auto a = SocketAddress::parse("localhost:1234");
  EXPECT_EQ(a.port(), 1234);
  ASSERT_TRUE(a.family() == AF_INET || a.family() == AF_INET6);
  EXPECT_TRUE(a.host() == "127.0.0.1" || a.host() == "::1") << a.host();
}

TEST(SocketAddress, RejectsBadInput) {
  for (const char* bad : {"", "1.2.3.4", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:-1", "1.2.3.4:12a",
                          "1.2.3.4: 1", "::1:80", "[::1]80", "[::1]", "[::1:80", ":80", "[]:80",
                          "no.such.host.invalid:80", "1.2.3.4:123456"}) {
    EXPECT_EQ(code_of([&] { SocketAddress::parse(bad); }), cclInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_EQ(code_of([] { SocketAddress::from_ip("localhost", 1); }), cclInvalidArgument);
  EXPECT_EQ(code_of([] { SocketAddress::from_ip("1.2.3", 1); }), cclInvalidArgument);
}

TEST(SocketAddress, FromIpAndSetPort) {
  auto a = SocketAddress::from_ip("10.0.0.7", 0);
  a.set_port(4242);
  EXPECT_EQ(a.to_string(), "10.0.0.7:4242");
  auto b = SocketAddress::from_ip("fd00::2", 9);
  EXPECT_EQ(b.to_string(), "[fd00::2]:9");
  EXPECT_EQ(SocketAddress().to_string(), "(no address)");
}

// A connected pair on loopback.
struct Pair {
  Socket listener, client, server;
};
Pair make_pair_v4() {
  Pair p;
  p.listener = Socket::listen(SocketAddress::from_ip("127.0.0.1", 0));
  p.client = Socket::connect(p.listener.local_address(), Deadline::after(milliseconds(2000)));
  p.server = p.listener.accept(Deadline::after(milliseconds(2000)));
  return p;
}

TEST(Socket, SendsAndReceivesWholeBuffers) {
  Pair p = make_pair_v4();
  EXPECT_EQ(p.server.peer_address().to_string(), p.client.local_address().to_string());
  std::vector<uint8_t> out(3 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + 1);
  // Larger than the socket buffers: the sender must wait for the receiver.
  std::thread sender(
      [&] { p.client.send_all(out.data(), out.size(), Deadline::after(milliseconds(5000))); });
  p.server.recv_all(in.data(), in.size(), Deadline::after(milliseconds(5000)));
  sender.join();
  EXPECT_EQ(in, out);
  p.client.send_all(nullptr, 0, Deadline::after(milliseconds(0)));  // zero bytes: no wait
}

TEST(Socket, Ipv6Loopback) {
  Socket listener;
  try {
    listener = Socket::listen(SocketAddress::from_ip("::1", 0));
  } catch (const Error&) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  Socket c = Socket::connect(listener.local_address(), Deadline::after(milliseconds(2000)));
  Socket s = listener.accept(Deadline::after(milliseconds(2000)));
  uint32_t v = 0xdeadbeef, got = 0;
  c.send_all(&v, sizeof(v), Deadline::after(milliseconds(2000)));
  s.recv_all(&got, sizeof(got), Deadline::after(milliseconds(2000)));
  EXPECT_EQ(got, v);
  EXPECT_EQ(s.local_address().family(), AF_INET6);
}

TEST(Socket, ClosedPeerIsRemoteErrorNamingThePeer) {
  Pair p = make_pair_v4();
  std::string peer = p.server.peer_address().to_string();
  p.client.close();
  char buf[4];
  std::string msg;
  try {
    p.server.recv_all(buf, sizeof(buf), Deadline::after(milliseconds(2000)));
    FAIL() << "recv_all returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclRemoteError);
    msg = e.what();
  }
  EXPECT_NE(msg.find(peer), std::string::npos) << msg;
  // Sending into a closed connection fails too (EPIPE or ECONNRESET), without SIGPIPE.
  std::vector<uint8_t> big(1 << 20);
  EXPECT_EQ(code_of([&] {
              for (int i = 0; i < 64; ++i) {
                p.server.send_all(big.data(), big.size(), Deadline::after(milliseconds(2000)));
              }
            }),
            cclRemoteError);
}

TEST(Socket, RecvTimesOutAtTheDeadline) {
  Pair p = make_pair_v4();
  char buf[4];
  auto t0 = Clock::now();
  EXPECT_EQ(code_of([&] { p.server.recv_all(buf, 4, Deadline::after(milliseconds(300))); }),
            cclTimeout);
  double took = seconds_since(t0);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 1.0);
}

TEST(Socket, AbortStopsAWaitPromptly) {
  Pair p = make_pair_v4();
  AbortFlag abort{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    abort = true;
  });
  char buf[4];
  auto t0 = Clock::now();
  std::string msg =
      message_of([&] { p.server.recv_all(buf, 4, Deadline::after(milliseconds(10000)), &abort); });
  setter.join();
  EXPECT_NE(msg.find("aborted"), std::string::npos) << msg;
  EXPECT_LT(seconds_since(t0), 1.0);
  EXPECT_EQ(code_of([&] { p.server.recv_all(buf, 4, Deadline::never(), &abort); }), cclRemoteError);
}

TEST(Socket, AcceptTimesOut) {
  Socket listener = Socket::listen(SocketAddress::from_ip("127.0.0.1", 0));
  auto t0 = Clock::now();
  EXPECT_EQ(code_of([&] { listener.accept(Deadline::after(milliseconds(200))); }), cclTimeout);
  EXPECT_LT(seconds_since(t0), 1.0);
}

// A port that nothing listens on (bound, then closed: the kernel will not reuse it at once).
SocketAddress unused_port() {
  Socket s = Socket::listen(SocketAddress::from_ip("127.0.0.1", 0));
  return s.local_address();
}

TEST(Socket, ConnectRetriesRefusedUntilTheDeadline) {
  SocketAddress nobody = unused_port();
  auto t0 = Clock::now();
  EXPECT_EQ(code_of([&] { Socket::connect(nobody, Deadline::after(milliseconds(300))); }),
            cclTimeout);
  double took = seconds_since(t0);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 1.0);
}

TEST(Socket, ConnectWaitsForALateListener) {
  SocketAddress address = unused_port();
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(200));
    Socket l = Socket::listen(address);
    Socket s = l.accept(Deadline::after(milliseconds(3000)));
    uint8_t b = 42;
    s.send_all(&b, 1, Deadline::after(milliseconds(3000)));
  });
  Socket c = Socket::connect(address, Deadline::after(milliseconds(3000)));
  uint8_t got = 0;
  c.recv_all(&got, 1, Deadline::after(milliseconds(3000)));
  late.join();
  EXPECT_EQ(got, 42);
}

TEST(Socket, MoveTransfersOwnership) {
  Socket a = Socket::listen(SocketAddress::from_ip("127.0.0.1", 0));
  int fd = a.fd();
  Socket b(std::move(a));
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.fd(), fd);
  Socket c;
  c = std::move(b);
  EXPECT_EQ(c.fd(), fd);
  c.close();
  EXPECT_FALSE(c.valid());
}

}  // namespace
}  // namespace ccl
