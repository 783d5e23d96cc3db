// Ranks in separate processes: rank 0 is the test process, rank 1 a forked child. The child gets
// rank 0's address through a pipe (each process has its own InMemoryStore), reports through its
// exit status and dies by alarm() if the parent never finishes with it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/bootstrap/tcp_store.h"
#include "core/bootstrap/unique_id.h"
#include "tcp_test_util.h"
#include "transport/tcp/tcp_handshake.h"

namespace ccl::transport::tcp_test {
namespace {

using std::chrono::milliseconds;

// Larger than the kernel buffers of a connection, so that a stalled sender stalls the transfer.
constexpr size_t kBig = 16 << 20;

class ProcessPair {
 public:
  // Forks; the child runs child(transport, connection to rank 0) and exits with its result.
  explicit ProcessPair(const std::function<int(Transport&, Connection*)>& child) {
    use_loopback();
    tag_ = unique_tag("process");
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      ::close(fds[1]);
      alarm(30);  // never outlive a failed test
      int code = 3;
      try {
        char buf[256] = {};
        ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
        if (n <= 0) _exit(4);
        InMemoryStore store;
        store.set(tcp::Handshake::address_key(tag_, 0), to_bytes(std::string(buf, n)));
        SetupContext ctx = make_context(1, 2, tag_, &store);
        auto t = make_tcp_transport(ctx);
        int peer = 0;
        Connection* c = t->connect(ctx, std::span<const int>(&peer, 1))[0];
        code = child(*t, c);
      } catch (...) {
        code = 2;
      }
      _exit(code);
    }
    ::close(fds[0]);
    SetupContext ctx = make_context(0, 2, tag_, &store_);
    transport = make_tcp_transport(ctx);
    std::thread setup([&] {
      int peer = 1;
      try {
        conn = transport->connect(ctx, std::span<const int>(&peer, 1))[0];
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
    std::string address = to_string(
        store_.get(tcp::Handshake::address_key(tag_, 0), Deadline::after(milliseconds(5000))));
    EXPECT_EQ(write(fds[1], address.data(), address.size()), static_cast<ssize_t>(address.size()));
    ::close(fds[1]);
    setup.join();
  }
  ~ProcessPair() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // The child's exit status (-signal if killed).
  int join() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

  std::unique_ptr<Transport> transport;
  Connection* conn = nullptr;

 private:
  InMemoryStore store_;
  std::string tag_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Drives without gtest (for the child): true when done() before the deadline.
bool drive_quietly(Transport& t, Connection* c, const std::function<bool()>& done) {
  Deadline deadline = Deadline::after(milliseconds(20000));
  while (!done()) {
    if (deadline.expired()) return false;
    if (!c->progress()) t.wait(milliseconds(20));
  }
  return true;
}

TEST(TcpProcess, ExchangeBothWays) {
  const size_t up = (1 << 20) + 7, down = 16 << 20;
  ProcessPair pair([&](Transport& t, Connection* c) {
    auto out = make_message(21, up);
    SendRequest send{out.data(), up};
    TestSink sink(SinkKind::AlignCheck, down);
    RecvRequest recv{down, &sink};
    c->post_send(&send);
    c->post_recv(&recv);
    if (!drive_quietly(t, c, [&] { return send.complete && recv.complete; })) return 5;
    if (first_mismatch(sink.data, 22) != -1 || !sink.errors.empty()) return 6;
    return 0;
  });
  ASSERT_NE(pair.conn, nullptr);
  auto out = make_message(22, down);
  SendRequest send{out.data(), down};
  TestSink sink(SinkKind::Direct, up);
  RecvRequest recv{up, &sink};
  pair.conn->post_send(&send);
  pair.conn->post_recv(&recv);
  drive(*pair.transport, {pair.conn}, [&] { return send.complete && recv.complete; });
  EXPECT_EQ(first_mismatch(sink.data, 21), -1);
  EXPECT_EQ(pair.join(), 0);
}

// The child sends part of a large message and stops; the parent kills it mid-transfer and must
// see RemoteError on its pending receive (and send) within a second.
TEST(TcpProcess, PeerKilledMidTransfer) {
  ProcessPair pair([&](Transport&, Connection* c) {
    std::vector<std::byte> out(kBig, std::byte{1});
    SendRequest send{out.data(), kBig};
    c->post_send(&send);
    while (send.done_bytes < (4 << 20)) c->progress();
    pause();  // killed here
    return 7;
  });
  ASSERT_NE(pair.conn, nullptr);
  std::vector<std::byte> out(kBig, std::byte{2});
  SendRequest send{out.data(), kBig};  // the child never reads it
  TestSink sink(SinkKind::Direct, kBig);
  RecvRequest recv{kBig, &sink};
  pair.conn->post_send(&send);
  pair.conn->post_recv(&recv);
  drive(*pair.transport, {pair.conn}, [&] { return recv.done_bytes >= (1 << 20); });
  ASSERT_FALSE(recv.complete);
  kill(pair.pid(), SIGKILL);
  auto start = Clock::now();
  expect_error(
      [&] {
        drive(
            *pair.transport, {pair.conn}, [] { return false; }, milliseconds(5000));
      },
      cclRemoteError, "rank 1");
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  EXPECT_FALSE(recv.complete);
  EXPECT_EQ(pair.join(), -SIGKILL);
}

// The same over several sockets (the setting is inherited by the child): the child moves a
// little of a 64 MiB message (one progress() call puts at most a few MiB per socket in the
// kernel) and stops; killed, it must be RemoteError naming it within 2 s, whichever socket the
// parent sees it on first.
class TcpProcessSockets : public ::testing::TestWithParam<SocketConfig> {};

TEST_P(TcpProcessSockets, PeerKilledMidMessage) {
  ScopedSocketConfig config(GetParam());
  const size_t bytes = 64 << 20;
  ProcessPair pair([&](Transport&, Connection* c) {
    std::vector<std::byte> out(bytes, std::byte{1});
    SendRequest send{out.data(), bytes};
    c->post_send(&send);
    c->progress();
    pause();  // killed here
    return 7;
  });
  ASSERT_NE(pair.conn, nullptr);
  TestSink sink(SinkKind::Copy, bytes);
  RecvRequest recv{bytes, &sink};
  pair.conn->post_recv(&recv);
  drive(*pair.transport, {pair.conn}, [&] { return recv.done_bytes > 0; });
  ASSERT_FALSE(recv.complete);
  kill(pair.pid(), SIGKILL);
  auto start = Clock::now();
  expect_error(
      [&] {
        drive(
            *pair.transport, {pair.conn}, [] { return false; }, milliseconds(5000));
      },
      cclRemoteError, "rank 1", 1);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_FALSE(recv.complete);
  EXPECT_EQ(pair.join(), -SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Tcp, TcpProcessSockets,
                         ::testing::Values(SocketConfig{1, 4}, SocketConfig{2, 2}),
                         [](const auto& info) { return info.param.name(); });

// One rank of a full mesh over `store`: every ordered pair exchanges a message at once. Returns
// 0 or a failure code; no gtest here, it also runs in forked children.
int mesh_rank(int rank, int nranks, Store& store, const std::string& tag) {
  SetupContext ctx = make_context(rank, nranks, tag, &store);
  auto t = make_tcp_transport(ctx);
  std::vector<int> peers;
  for (int p = 0; p < nranks; ++p) {
    if (p != rank) peers.push_back(p);
  }
  auto conns = t->connect(ctx, peers);
  auto size_of = [](int src, int dst) { return size_t(65536) * (src + 1) + 4093 * dst; };
  auto seed_of = [](int src, int dst) { return static_cast<uint32_t>(100 + src * 8 + dst); };
  size_t n = peers.size();
  std::vector<std::vector<std::byte>> outs(n);
  std::vector<SendRequest> sends(n);
  std::vector<std::unique_ptr<TestSink>> sinks(n);
  std::vector<RecvRequest> recvs(n);
  for (size_t i = 0; i < n; ++i) {
    int p = peers[i];
    outs[i] = make_message(seed_of(rank, p), size_of(rank, p));
    sends[i] = SendRequest{outs[i].data(), outs[i].size()};
    sinks[i] = std::make_unique<TestSink>(static_cast<SinkKind>(p % 3), size_of(p, rank));
    recvs[i] = RecvRequest{size_of(p, rank), sinks[i].get()};
    conns[i]->post_send(&sends[i]);
    conns[i]->post_recv(&recvs[i]);
  }
  Deadline deadline = Deadline::after(milliseconds(20000));
  for (;;) {
    bool moved = false, done = true;
    for (size_t i = 0; i < n; ++i) {
      moved |= conns[i]->progress();
      done &= sends[i].complete && recvs[i].complete;
    }
    if (done) break;
    if (deadline.expired()) return 5;
    if (!moved) t->wait(milliseconds(20));
  }
  for (size_t i = 0; i < n; ++i) {
    if (first_mismatch(sinks[i]->data, seed_of(peers[i], rank)) != -1) return 6;
    if (!sinks[i]->errors.empty()) return 7;
  }
  // Nobody leaves before everyone has received: a close must not race a peer's last receive
  // (it would not lose data, but keep the test about the exchange).
  store_barrier(store, tag + "/done", nranks, deadline);
  return 0;
}

// Four processes (the test process is rank 0) meeting through a StoreServer and TcpStore.
TEST(TcpProcess, FourRanksThroughTcpStore) {
  use_loopback();
  const int nranks = 4;
  std::string tag = unique_tag("four");
  Secret secret = random_secret();
  std::vector<pid_t> children;
  std::vector<int> pipes;
  // Whatever happens to the test, no child outlives it.
  struct Reaper {
    std::vector<pid_t>& pids;
    ~Reaper() {
      for (pid_t pid : pids) {
        if (pid <= 0) continue;
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } reaper{children};
  // Fork before the server thread exists: children then inherit a single-threaded process.
  for (int rank = 1; rank < nranks; ++rank) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
      ::close(fds[1]);
      alarm(30);
      int code = 3;
      try {
        char buf[256] = {};
        ssize_t len = read(fds[0], buf, sizeof(buf) - 1);
        if (len <= 0) _exit(4);
        auto store = TcpStore::connect(SocketAddress::parse(std::string(buf, len)), secret, rank,
                                       nranks, Deadline::after(milliseconds(10000)), nullptr);
        code = mesh_rank(rank, nranks, *store, tag);
      } catch (...) {
        code = 2;
      }
      _exit(code);
    }
    ::close(fds[0]);
    children.push_back(pid);
    pipes.push_back(fds[1]);
  }
  auto server =
      StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret, std::chrono::seconds(20));
  std::string address = server->address().to_string();
  for (int fd : pipes) {
    EXPECT_EQ(write(fd, address.data(), address.size()), static_cast<ssize_t>(address.size()));
    ::close(fd);
  }
  int mine = -1;
  try {
    auto store = TcpStore::connect(server->address(), secret, 0, nranks,
                                   Deadline::after(milliseconds(10000)), nullptr);
    mine = mesh_rank(0, nranks, *store, tag);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  EXPECT_EQ(mine, 0);
  for (size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    waitpid(children[i], &status, 0);
    children[i] = -1;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << i + 1 << " status " << status;
  }
}

}  // namespace
}  // namespace ccl::transport::tcp_test
