// Strangers against a live StoreServer while real ranks join it: wrong secrets, garbage, half
// hellos, slow trickles, a flood of held connections, oversize length fields, and a server whose
// process runs out of descriptors. Every stranger must be dropped (EOF or reset) within the hello
// timeout, and every real rank must finish its set/get/barrier before its own deadline.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/bootstrap/store_protocol.h"
#include "core/bootstrap/store_server_impl.h"
#include "core/bootstrap/tcp_store.h"
#include "base/error.h"

namespace ccl {
namespace {

using namespace store_wire;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kHelloTimeout = store_server_detail::kHelloTimeout;
// Room for scheduling on a loaded machine; a stranger still open after this was not dropped.
constexpr auto kSlack = seconds(4);
// A real rank's own bound for everything it does (its CCL_TIMEOUT, so to speak).
constexpr auto kRankTimeout = seconds(20);

Deadline after(std::chrono::milliseconds ms) { return Deadline::after(ms); }

Secret other_secret(const Secret& not_this) {
  Secret s = random_secret();
  if (s == not_this) s[0] ^= 1;
  return s;
}

Bytes hello_bytes(const Secret& secret, int rank, int nranks) {
  Hello h;
  h.secret = secret;
  h.rank = rank;
  h.nranks = nranks;
  return encode_hello(h);
}

Bytes random_bytes(size_t n) {
  Bytes b(n);
  if (n > 0 && getrandom(b.data(), n, 0) != static_cast<ssize_t>(n)) {
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 131 + 7);
  }
  return b;
}

// Sends what it can without blocking: a stranger never waits on the server.
void send_some(Socket& s, const Bytes& b) {
  [[maybe_unused]] ssize_t n = ::send(s.fd(), b.data(), b.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// True once the peer has closed `s` (EOF or reset), false if it is still open at the deadline.
bool closed_by_server(Socket& s, Deadline deadline) {
  for (;;) {
    char buf[256];
    ssize_t n = ::recv(s.fd(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    if (deadline.expired()) return false;
    pollfd p{s.fd(), POLLIN | POLLRDHUP, 0};
    ::poll(&p, 1, static_cast<int>(deadline.remaining(milliseconds(100)).count() / 1000 + 1));
  }
}

// A stranger that sends `hello` one byte a second; true if the server dropped it by `deadline`.
bool trickle(const SocketAddress& server, const Bytes& hello, Deadline deadline) {
  Socket s = Socket::connect(server, after(seconds(5)));
  for (size_t i = 0; i < hello.size() && !deadline.expired(); ++i) {
    if (::send(s.fd(), &hello[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN) {
      return true;  // reset by the server
    }
    if (closed_by_server(s, Deadline::after(milliseconds(1000)))) return true;
  }
  return closed_by_server(s, deadline);
}

// One real rank: publishes its key, reads everyone's, meets the others at two barriers and counts
// itself in. Returns the failures it saw (0 when all is well); keeps its store in *out so that
// the caller decides when it leaves.
int real_rank(const SocketAddress& server, const Secret& secret, int rank, int nranks,
              std::unique_ptr<TcpStore>* out) {
  int failures = 0;
  try {
    const Deadline deadline = Deadline::after(kRankTimeout);
    auto store = TcpStore::connect(server, secret, rank, nranks, deadline, nullptr);
    store->set("rank/" + std::to_string(rank), to_bytes("value of " + std::to_string(rank)));
    for (int r = 0; r < nranks; ++r) {
      Bytes got = store->get("rank/" + std::to_string(r), deadline);
      if (to_string(got) != "value of " + std::to_string(r)) ++failures;
    }
    store_barrier(*store, "read", nranks, deadline);
    store->add("count", 1);
    store_barrier(*store, "counted", nranks, deadline);
    if (store->add("count", 0) != nranks) ++failures;
    *out = std::move(store);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << rank << ": " << e.what();
    ++failures;
  }
  return failures;
}

struct Stranger {
  const char* kind;
  Socket socket;
};

TEST(HostileClients, StrangersAreDroppedWhileRealRanksJoin) {
  constexpr int kRanks = 4;
  constexpr int kFlood = 300;  // more than the strangers' cap, so that the oldest must go
  const Secret secret = random_secret();
  auto server = StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, seconds(60));
  const SocketAddress address = server->address();
  auto open = [&] { return Socket::connect(address, after(seconds(5))); };

  std::vector<Stranger> strangers;
  for (int i = 0; i < kFlood; ++i) strangers.push_back({"flood", open()});

  // The real ranks join now, while the flood holds its connections and more strangers come.
  std::atomic<int> real_failures{0};
  std::vector<std::unique_ptr<TcpStore>> stores(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back(
        [&, r] { real_failures += real_rank(address, secret, r, kRanks, &stores[r]); });
  }
  // Slow trickles of a hello: with a wrong secret, and with the right one (a rank that is too
  // slow is dropped all the same: the deadline holds whatever the bytes are).
  std::atomic<int> trickles_dropped{0};
  const Deadline trickle_deadline = Deadline::after(kHelloTimeout + kSlack);
  std::vector<std::thread> trickles;
  for (const Secret& s : {other_secret(secret), secret}) {
    trickles.emplace_back([&, s] {
      trickles_dropped += trickle(address, hello_bytes(s, 1, kRanks), trickle_deadline) ? 1 : 0;
    });
  }

  for (int i = 0; i < 8; ++i) {
    Stranger s{"wrong secret", open()};
    send_some(s.socket, hello_bytes(other_secret(secret), i % kRanks, kRanks));
    strangers.push_back(std::move(s));
  }
  for (size_t n : {1, 3, 7, 32, 33, 200, 4096}) {
    Stranger s{"garbage", open()};
    send_some(s.socket, random_bytes(n));
    strangers.push_back(std::move(s));
  }
  {
    Stranger s{"garbage after the magic", open()};
    Bytes b = hello_bytes(secret, 0, kRanks);
    b.resize(4);
    Bytes junk = random_bytes(60);
    b.insert(b.end(), junk.begin(), junk.end());
    b[4] = 0xee;  // a version no server speaks
    send_some(s.socket, b);
    strangers.push_back(std::move(s));
  }
  for (size_t cut : {4, 8, 16, 24, 31}) {
    Stranger s{"half a hello", open()};
    Bytes b = hello_bytes(secret, 1, kRanks);
    b.resize(cut);
    send_some(s.socket, b);
    strangers.push_back(std::move(s));
  }
  {
    Stranger s{"hello with oversize nranks", open()};
    send_some(s.socket, hello_bytes(secret, 0, 0x7fffffff));
    strangers.push_back(std::move(s));
  }
  // Oversize length fields behind a valid hello (claiming rank 0, which joins anyway): each is
  // refused as soon as its length arrives, before anything is buffered for it.
  auto oversize = [&](const char* kind, Bytes request) {
    Stranger s{kind, open()};
    Bytes b = hello_bytes(secret, 0, kRanks);
    b.insert(b.end(), request.begin(), request.end());
    send_some(s.socket, b);
    strangers.push_back(std::move(s));
  };
  Bytes req{static_cast<uint8_t>(Op::kSet)};
  put_u32(req, 0xffffffffu);
  oversize("key length 4 GiB", req);
  req = {static_cast<uint8_t>(Op::kGet)};
  put_u32(req, kMaxKeyBytes + 1);
  oversize("key length over the bound", req);
  req = {static_cast<uint8_t>(Op::kSet)};
  put_u32(req, 1);
  req.push_back('k');
  put_u32(req, 0xffffffffu);
  oversize("value length 4 GiB", req);
  req = {static_cast<uint8_t>(Op::kWait)};
  put_u32(req, 0);
  put_u32(req, 0xffffffffu);
  oversize("wait for 4 G keys", req);
  oversize("unknown op", Bytes{0x77, 0, 0, 0, 0});
  const Deadline drop_deadline = Deadline::after(kHelloTimeout + kSlack);

  for (auto& t : ranks) t.join();
  EXPECT_EQ(real_failures.load(), 0);
  {
    // Only now: a valid hello with the secret fixes nranks for the server, so one that came
    // before every real rank would make them the misfits (a misconfigured job fails either way).
    Stranger s{"hello with another nranks", open()};
    send_some(s.socket, hello_bytes(secret, 0, kRanks + 1));
    strangers.push_back(std::move(s));
  }
  // Still serving: the real ranks have not left, so strangers are dropped by their own checks
  // and deadlines, not by the server's end.
  EXPECT_FALSE(server->finished());

  int not_dropped = 0;
  for (auto& s : strangers) {
    if (!closed_by_server(s.socket, drop_deadline)) {
      ADD_FAILURE() << "a stranger (" << s.kind << ") was not dropped within the hello timeout";
      ++not_dropped;
    }
  }
  for (auto& t : trickles) t.join();
  EXPECT_EQ(trickles_dropped.load(), 2) << "a slow trickle outlived its hello timeout";
  not_dropped += 2 - trickles_dropped.load();
  EXPECT_FALSE(server->finished());

  // The real ranks are undisturbed to the end: one more round, then they leave and the server
  // finishes as it should.
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(stores[r] != nullptr);
    stores[r]->set("late/" + std::to_string(r), to_bytes("x"));
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(to_string(stores[r]->get("late/" + std::to_string((r + 1) % kRanks),
                                       Deadline::after(kRankTimeout))),
              "x");
  }
  stores.clear();
  server->wait_finished(Deadline::after(seconds(10)));
  EXPECT_TRUE(server->finished());

  const size_t tried = strangers.size() + trickles.size();
  const int effects = real_failures.load() + not_dropped;
  printf("hostile connections tried: %zu, effects: %d\n", tried, effects);
  EXPECT_EQ(effects, 0);
}

// The server's process runs out of descriptors while a flood holds connections: the real ranks
// queued behind the flood must still get in before their deadline (a server that paused and
// gave up one stranger per pause would need half a minute here).
TEST(HostileClients, RealRanksGetInWhenAFloodExhaustsDescriptors) {
  constexpr int kRanks = 3;
  constexpr int kFlood = 300;
  const Secret secret = random_secret();
  int port_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The server's process: descriptors are capped just above what it holds once serving.
    ::close(port_pipe[0]);
    alarm(60);  // never outlive a failed test
    int code = 3;
    try {
      auto server = StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, seconds(40));
      int open_fds = 0;
      for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
        ++open_fds;
      rlimit limit{};
      getrlimit(RLIMIT_NOFILE, &limit);
      limit.rlim_cur = static_cast<rlim_t>(open_fds + 24);
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(4);
      uint16_t port = server->address().port();
      if (write(port_pipe[1], &port, sizeof(port)) != sizeof(port)) _exit(5);
      server->wait_finished(Deadline::after(seconds(45)));
      code = server->finished() ? 0 : 1;
    } catch (...) {
      code = 2;
    }
    _exit(code);  // no atexit handlers: they belong to the parent's state
  }
  ::close(port_pipe[1]);
  uint16_t port = 0;
  pollfd p{port_pipe[0], POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  ASSERT_EQ(read(port_pipe[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  ::close(port_pipe[0]);
  const SocketAddress address = SocketAddress::from_ip("127.0.0.1", port);

  std::vector<Socket> flood;
  for (int i = 0; i < kFlood; ++i) flood.push_back(Socket::connect(address, after(seconds(5))));
  std::atomic<int> real_failures{0};
  std::vector<std::unique_ptr<TcpStore>> stores(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back(
        [&, r] { real_failures += real_rank(address, secret, r, kRanks, &stores[r]); });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(real_failures.load(), 0);
  stores.clear();  // the ranks leave: the server finishes and its process exits 0

  int status = -1;
  auto deadline = Deadline::after(seconds(30));
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (deadline.expired()) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "server process status " << status;
  int not_dropped = 0;
  for (auto& s : flood) not_dropped += closed_by_server(s, after(seconds(2))) ? 0 : 1;
  EXPECT_EQ(not_dropped, 0);
  const int effects =
      real_failures.load() + not_dropped + (WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
  printf("hostile connections tried: %d, effects: %d\n", kFlood, effects);
}

}  // namespace
}  // namespace ccl
