// StoreServer lifetime and robustness: when it finishes, and that wrong secrets, garbage, stalled
// or oversize messages and connection floods cost a well-behaved client nothing.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "core/bootstrap/store_protocol.h"
#include "core/bootstrap/tcp_store.h"
#include "base/error.h"

namespace ccl {
namespace {

using namespace store_wire;
using std::chrono::milliseconds;

Deadline in_ms(int ms) { return Deadline::after(milliseconds(ms)); }

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

cclResult_t code_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return cclSuccess;
}

class StoreServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = random_secret();
    server_ = StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret_,
                                 std::chrono::seconds(30));
  }
  std::unique_ptr<TcpStore> client(int rank, int nranks, const Secret* secret = nullptr) {
    return TcpStore::connect(server_->address(), secret ? *secret : secret_, rank, nranks,
                             in_ms(3000), nullptr);
  }
  Socket raw() { return Socket::connect(server_->address(), in_ms(3000)); }
  void send(Socket& s, const Bytes& b) { s.send_all(b.data(), b.size(), in_ms(3000)); }
  void send_hello(Socket& s, int rank, int nranks, Secret secret) {
    Hello h;
    h.secret = secret;
    h.rank = rank;
    h.nranks = nranks;
    send(s, encode_hello(h));
  }
  // A well-behaved client gets prompt answers.
  void expect_serves(TcpStore& store, const std::string& key) {
    auto t0 = Clock::now();
    store.set(key, to_bytes("ok"));
    EXPECT_EQ(to_string(store.get(key, in_ms(2000))), "ok");
    EXPECT_EQ(store.add(key + "/n", 1), 1);
    EXPECT_LT(seconds_since(t0), 2.0);
  }

  Secret secret_{};
  std::unique_ptr<StoreServer> server_;
};

// True once the server has closed `s` (EOF or reset), false if it is still open at the deadline.
bool closed_by_server(Socket& s, Deadline deadline) {
  for (;;) {
    char buf[256];
    ssize_t n = ::recv(s.fd(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    if (deadline.expired()) return false;
    pollfd p{s.fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(deadline.remaining(milliseconds(100)).count() / 1000 + 1));
  }
}

TEST_F(StoreServerTest, FinishesOnceEveryRankConnectedAndLeft) {
  auto r0 = client(0, 3);
  auto r1 = client(1, 3);
  r0->set("a", Bytes{1});
  r0.reset();
  r1->get("a", in_ms(2000));
  r1.reset();
  // Two of three ranks came and went: rank 2 may still come.
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(server_->finished());
  auto r2 = client(2, 3);
  EXPECT_EQ(r2->get("a", in_ms(2000)), Bytes{1});
  EXPECT_FALSE(server_->finished());
  r2.reset();
  server_->wait_finished(in_ms(3000));
  EXPECT_TRUE(server_->finished());
  // It no longer listens.
  EXPECT_EQ(code_of([&] { Socket::connect(server_->address(), in_ms(200)); }), cclTimeout);
}

TEST(StoreServerIdle, FinishesAfterIdleTimeoutWithNoClient) {
  Secret secret = random_secret();
  auto t0 = Clock::now();
  auto server =
      StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, milliseconds(200));
  server->wait_finished(in_ms(3000));
  EXPECT_TRUE(server->finished());
  EXPECT_GE(seconds_since(t0), 0.19);
  EXPECT_LT(seconds_since(t0), 2.0);

  // A connected client keeps it alive; the idle clock starts when the last one leaves.
  auto server2 =
      StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, milliseconds(200));
  auto c = TcpStore::connect(server2->address(), secret, 0, 2, in_ms(2000), nullptr);
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_FALSE(server2->finished());
  c->set("x", Bytes{});
  c.reset();
  server2->wait_finished(in_ms(3000));
  EXPECT_TRUE(server2->finished());
}

TEST(StoreServerStop, StopIsPromptAndWaitFinishedIsBounded) {
  auto server = StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), random_secret(),
                                   std::chrono::seconds(60));
  auto t0 = Clock::now();
  server->wait_finished(in_ms(200));
  EXPECT_FALSE(server->finished());
  EXPECT_LT(seconds_since(t0), 1.0);
  t0 = Clock::now();
  server->stop();
  EXPECT_TRUE(server->finished());
  EXPECT_LT(seconds_since(t0), 1.0);
  server->stop();  // twice is fine
}

TEST_F(StoreServerTest, WrongSecretIsDroppedWhileOthersWork) {
  auto good = client(0, 2);
  Secret wrong = secret_;
  wrong[15] ^= 1;
  auto bad = client(1, 2, &wrong);  // no hello reply: the refusal shows at the first request
  std::string msg;
  EXPECT_EQ(code_of([&] { bad->set("x", Bytes{1}); }, &msg), cclRemoteError);
  EXPECT_NE(msg.find("store set 'x'"), std::string::npos) << msg;
  // Later calls fail at once: the connection is gone.
  EXPECT_EQ(code_of([&] { bad->get("x", in_ms(100)); }, &msg), cclRemoteError);
  EXPECT_NE(msg.find("earlier"), std::string::npos) << msg;

  Socket raw_bad = raw();
  send_hello(raw_bad, 1, 2, wrong);
  EXPECT_TRUE(closed_by_server(raw_bad, in_ms(2000)));
  Socket mismatch = raw();
  send_hello(mismatch, 1, 5, secret_);  // nranks differs from the first client's
  EXPECT_TRUE(closed_by_server(mismatch, in_ms(2000)));
  Socket out_of_range = raw();
  send_hello(out_of_range, 2, 2, secret_);
  EXPECT_TRUE(closed_by_server(out_of_range, in_ms(2000)));
  Socket bad_magic = raw();
  Bytes hello = encode_hello(Hello{.magic = 0x12345678, .secret = secret_, .rank = 1, .nranks = 2});
  send(bad_magic, hello);
  EXPECT_TRUE(closed_by_server(bad_magic, in_ms(2000)));

  expect_serves(*good, "good");
  EXPECT_FALSE(server_->finished());
}

TEST_F(StoreServerTest, GarbageAndHalfMessagesDoNotDisturbOthers) {
  auto good = client(0, 2);
  Socket garbage = raw();
  send(garbage, Bytes(64, 0xab));
  Socket half_hello = raw();
  send(half_hello, Bytes{0x43, 0x43, 0x4c, 0x53, 1, 0, 0});  // magic and part of the version
  Socket half_request = raw();
  send_hello(half_request, 1, 2, secret_);
  send(half_request, Bytes{static_cast<uint8_t>(Op::kGet), 3, 0});  // op and half a key length
  Socket unknown_op = raw();
  send_hello(unknown_op, 1, 2, secret_);
  send(unknown_op, Bytes{9, 0, 0, 0, 0});

  EXPECT_TRUE(closed_by_server(garbage, in_ms(2000)));
  EXPECT_TRUE(closed_by_server(unknown_op, in_ms(2000)));
  expect_serves(*good, "k1");
  // The stalled ones are still waited for (within the hello timeout), and cost nothing.
  EXPECT_FALSE(closed_by_server(half_hello, in_ms(100)));
  EXPECT_FALSE(closed_by_server(half_request, in_ms(100)));
  expect_serves(*good, "k2");
  // The half request completes later and is answered.
  good->set("abc", to_bytes("late"));
  send(half_request, Bytes{0, 0, 'a', 'b', 'c'});
  uint8_t reply[1 + 4 + 4];
  half_request.recv_all(reply, sizeof(reply), in_ms(2000));
  EXPECT_EQ(reply[0], kStatusOk);
  EXPECT_EQ(get_u32(reply + 1), 4u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(reply + 5), 4), "late");
}

TEST_F(StoreServerTest, OversizeLengthsAreDroppedBeforeTheirPayload) {
  auto good = client(0, 2);
  auto authenticated = [&] {
    Socket s = raw();
    send_hello(s, 1, 2, secret_);
    return s;
  };
  Socket long_key = authenticated();
  Bytes req{static_cast<uint8_t>(Op::kSet)};
  put_u32(req, kMaxKeyBytes + 1);
  send(long_key, req);
  Socket long_value = authenticated();
  req = {static_cast<uint8_t>(Op::kSet)};
  put_u32(req, 1);
  req.push_back('k');
  put_u32(req, kMaxValueBytes + 1);
  send(long_value, req);
  Socket many_keys = authenticated();
  req = {static_cast<uint8_t>(Op::kWait)};
  put_u32(req, 0);
  put_u32(req, kMaxWaitKeys + 1);
  send(many_keys, req);
  Socket wait_with_key = authenticated();
  req = {static_cast<uint8_t>(Op::kWait)};
  put_u32(req, 1);
  req.push_back('k');
  send(wait_with_key, req);
  Socket huge_wait = authenticated();  // each key within bounds, the whole request not
  req = {static_cast<uint8_t>(Op::kWait)};
  put_u32(req, 0);
  put_u32(req, 8192);
  send(huge_wait, req);
  Bytes key(4 + kMaxKeyBytes, 'x');
  key[0] = 0;
  key[1] = kMaxKeyBytes >> 8;
  key[2] = key[3] = 0;
  bool dropped = false;
  for (int i = 0; i < 8192 && !dropped; ++i) {
    dropped =
        code_of([&] { huge_wait.send_all(key.data(), key.size(), in_ms(2000)); }) != cclSuccess;
    if (i % 256 == 0 && closed_by_server(huge_wait, in_ms(0))) dropped = true;
  }

  for (Socket* s : {&long_key, &long_value, &many_keys, &wait_with_key, &huge_wait}) {
    EXPECT_TRUE(closed_by_server(*s, in_ms(2000)));
  }
  expect_serves(*good, "k");
}

TEST_F(StoreServerTest, ConnectionFloodDoesNotDisturbAGoodClient) {
  auto good = client(0, 1);
  std::vector<Socket> flood;
  for (int i = 0; i < 200; ++i) flood.push_back(raw());
  expect_serves(*good, "during-flood");
  // Connections that never say hello are closed after the hello timeout (a few seconds).
  auto deadline = in_ms(9000);
  int closed = 0;
  for (auto& s : flood) closed += closed_by_server(s, deadline) ? 1 : 0;
  EXPECT_EQ(closed, 200);
  expect_serves(*good, "after-flood");
}

TEST_F(StoreServerTest, AClientThatNeverReadsDoesNotBlockOthers) {
  auto good = client(0, 2);
  Bytes big(4 << 20, 0x5a);
  good->set("big", big);
  Socket greedy = raw();
  send_hello(greedy, 1, 2, secret_);
  Bytes req{static_cast<uint8_t>(Op::kGet)};
  put_u32(req, 3);
  req.insert(req.end(), {'b', 'i', 'g'});
  for (int i = 0; i < 8; ++i) send(greedy, req);  // 32 MiB of replies that nobody reads
  std::this_thread::sleep_for(milliseconds(100));
  auto t0 = Clock::now();
  EXPECT_EQ(good->get("big", in_ms(3000)), big);
  EXPECT_LT(seconds_since(t0), 2.0);
  expect_serves(*good, "k");
}

TEST_F(StoreServerTest, AParkedClientThatLeavesIsForgotten) {
  auto good = client(0, 2);
  {
    auto leaving = client(1, 2);
    EXPECT_EQ(code_of([&] { leaving->wait({"w1", "w2"}, in_ms(100)); }), cclTimeout);
  }
  Socket parked = raw();
  send_hello(parked, 1, 2, secret_);
  Bytes req{static_cast<uint8_t>(Op::kGet)};
  put_u32(req, 2);
  req.insert(req.end(), {'w', '1'});
  send(parked, req);
  std::this_thread::sleep_for(milliseconds(50));
  parked.close();
  std::this_thread::sleep_for(milliseconds(50));
  good->set("w1", Bytes{1});
  good->set("w2", Bytes{2});
  expect_serves(*good, "k");
}

TEST_F(StoreServerTest, ServerGoneIsRemoteError) {
  auto c = client(0, 2);
  c->set("x", Bytes{1});
  server_->stop();
  auto t0 = Clock::now();
  EXPECT_EQ(code_of([&] { c->get("y", in_ms(5000)); }), cclRemoteError);
  EXPECT_LT(seconds_since(t0), 1.0);
}

TEST_F(StoreServerTest, AbortStopsABlockedGet) {
  AbortFlag abort{false};
  auto c = TcpStore::connect(server_->address(), secret_, 0, 1, in_ms(2000), &abort);
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    abort = true;
  });
  auto t0 = Clock::now();
  std::string msg;
  EXPECT_EQ(code_of([&] { c->get("never", in_ms(10000)); }, &msg), cclRemoteError);
  setter.join();
  EXPECT_NE(msg.find("aborted"), std::string::npos) << msg;
  EXPECT_LT(seconds_since(t0), 1.0);
}

TEST_F(StoreServerTest, LimitsAreCheckedOnTheClientToo) {
  auto c = client(0, 1);
  EXPECT_EQ(code_of([&] { c->set(std::string(kMaxKeyBytes + 1, 'k'), Bytes{}); }),
            cclInvalidArgument);
  EXPECT_EQ(code_of([&] { c->set("v", Bytes(kMaxValueBytes + 1)); }), cclInvalidArgument);
  EXPECT_EQ(code_of([&] { c->wait(std::vector<std::string>(kMaxWaitKeys + 1), in_ms(100)); }),
            cclInvalidArgument);
  EXPECT_EQ(code_of([&] { client(2, 2); }), cclInvalidArgument);
  EXPECT_EQ(code_of([&] { client(0, 0); }), cclInvalidArgument);
  // The largest value goes through; the connection is still fine after the rejected calls.
  Bytes largest(kMaxValueBytes, 3);
  c->set("largest", largest);
  EXPECT_EQ(c->get("largest", in_ms(5000)), largest);
}

TEST(StoreServerListenFd, ServesOnASocketHandedIn) {
  Socket listener = Socket::listen(SocketAddress::from_ip("127.0.0.1", 0));
  SocketAddress address = listener.local_address();
  Secret secret = random_secret();
  auto server =
      StoreServer::start(SocketAddress(), secret, std::chrono::seconds(30), listener.release());
  EXPECT_EQ(server->address().to_string(), address.to_string());
  auto c = TcpStore::connect(address, secret, 0, 1, in_ms(2000), nullptr);
  c->set("x", to_bytes("y"));
  EXPECT_EQ(to_string(c->get("x", in_ms(1000))), "y");
  c.reset();
  server->wait_finished(in_ms(3000));
  EXPECT_TRUE(server->finished());
}

TEST(AdoptedStoreServer, RunsUntilItsRanksLeave) {
  Secret secret = random_secret();
  auto server =
      StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, std::chrono::seconds(60));
  SocketAddress address = server->address();
  adopt_store_server(std::move(server));
  auto c = TcpStore::connect(address, secret, 0, 1, in_ms(2000), nullptr);
  c->set("x", Bytes{1});
  c.reset();
  // Finished servers stop listening; poll for that.
  bool gone = false;
  for (auto t0 = Clock::now(); !gone && seconds_since(t0) < 3.0;) {
    gone = code_of([&] { Socket::connect(address, in_ms(50)); }) == cclTimeout;
  }
  EXPECT_TRUE(gone);
  // Adopting reaps the finished one; this one never finishes by itself and is stopped at exit.
  adopt_store_server(
      StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, std::chrono::seconds(60)));
}

// A forked child holds copies of the servers but not their threads: its exit must not wait for
// them (joining a thread that does not exist in the child would hang forever).
TEST(AdoptedStoreServer, AForkedChildExitsPromptly) {
  Secret secret = random_secret();
  adopt_store_server(
      StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, std::chrono::seconds(60)));
  auto own =
      StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, std::chrono::seconds(60));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    own.reset();
    exit(0);  // runs static destructors, the adopted servers' list among them
  }
  int status = -1;
  bool exited = false;
  for (auto t0 = Clock::now(); !exited && seconds_since(t0) < 5.0;) {
    exited = waitpid(child, &status, WNOHANG) == child;
    if (!exited) std::this_thread::sleep_for(milliseconds(10));
  }
  if (!exited) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  EXPECT_TRUE(exited) << "the child hung at exit";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The parent's own server is untouched.
  auto c = TcpStore::connect(own->address(), secret, 0, 1, in_ms(2000), nullptr);
  c->set("x", Bytes{1});
  EXPECT_EQ(c->get("x", in_ms(1000)), Bytes{1});
}

}  // namespace
}  // namespace ccl
