// Ranks in separate processes: rank 0 is the test process, the others forked children that meet
// it through a StoreServer (TcpStore clients), each with its own UCX context. Children are forked
// before the server thread starts and before this process makes a UCX context, report through
// their exit status and die by alarm() if the parent never finishes with them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/bootstrap/socket.h"
#include "core/bootstrap/tcp_store.h"
#include "core/bootstrap/unique_id.h"
#include "ucx_test_util.h"

namespace ccl::transport::ucx_test {
namespace {

using std::chrono::milliseconds;

// What a rank runs once connected to every other rank; returns 0 or a failure code.
using RankBody =
    std::function<int(int rank, Transport&, std::vector<Connection*>& conns, Store& store)>;

class ProcessGroup {
 public:
  // Forks nranks - 1 children running `child`; the test process is rank 0 and connects too.
  ProcessGroup(int nranks, const RankBody& child, ucx::UcxOptions options = {})
      : nranks_(nranks), options_(options) {
    tag_ = unique_tag("process");
    secret_ = random_secret();
    std::vector<int> pipes;
    for (int rank = 1; rank < nranks; ++rank) {
      int fds[2];
      if (pipe(fds) != 0) throw std::runtime_error("pipe");
      const pid_t pid = fork();
      if (pid == 0) {
        ::close(fds[1]);
        alarm(30);  // never outlive a failed test
        _exit(run_child(rank, fds[0], child));
      }
      ::close(fds[0]);
      children_.push_back(pid);
      pipes.push_back(fds[1]);
    }
    server_ = StoreServer::start(SocketAddress::from_ip("127.0.0.1", 0), secret_,
                                 std::chrono::seconds(30));
    const std::string address = server_->address().to_string();
    for (int fd : pipes) {
      EXPECT_EQ(write(fd, address.data(), address.size()), static_cast<ssize_t>(address.size()));
      ::close(fd);
    }
    store_ = TcpStore::connect(server_->address(), secret_, 0, nranks,
                               Deadline::after(milliseconds(10000)), nullptr);
    SetupContext ctx = make_context(0, nranks, tag_, store_.get());
    transport = ucx::make_ucx_transport(ctx, options_);
    std::vector<int> peers;
    for (int p = 1; p < nranks; ++p) peers.push_back(p);
    conns = transport->connect(ctx, peers);
  }
  ~ProcessGroup() {
    transport.reset();
    for (pid_t pid : children_) {
      if (pid <= 0) continue;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  Store& store() { return *store_; }
  const std::string& tag() const { return tag_; }
  pid_t pid(int rank) const { return children_[rank - 1]; }
  // Child `rank`'s exit status (-signal if killed).
  int join(int rank) {
    int status = 0;
    waitpid(children_[rank - 1], &status, 0);
    children_[rank - 1] = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

  std::unique_ptr<Transport> transport;
  std::vector<Connection*> conns;  // conns[i] to rank i + 1

 private:
  int run_child(int rank, int pipe_fd, const RankBody& body) {
    try {
      char buf[256] = {};
      const ssize_t n = read(pipe_fd, buf, sizeof(buf) - 1);
      if (n <= 0) return 4;
      auto store = TcpStore::connect(SocketAddress::parse(std::string(buf, n)), secret_, rank,
                                     nranks_, Deadline::after(milliseconds(10000)), nullptr);
      SetupContext ctx = make_context(rank, nranks_, tag_, store.get());
      auto t = ucx::make_ucx_transport(ctx, options_);
      std::vector<int> peers;
      for (int p = 0; p < nranks_; ++p) {
        if (p != rank) peers.push_back(p);
      }
      std::vector<Connection*> conns = t->connect(ctx, peers);
      return body(rank, *t, conns, *store);
    } catch (...) {
      return 2;
    }
  }

  int nranks_;
  ucx::UcxOptions options_;
  std::string tag_;
  Secret secret_{};
  std::vector<pid_t> children_;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<TcpStore> store_;
};

size_t size_of(int src, int dst) { return (size_t(1) << 20) * (src + 1) + 4093 * dst + 7; }
uint32_t seed_of(int src, int dst) { return static_cast<uint32_t>(100 + src * 8 + dst); }

// Every rank sends one message to every other and receives one from each, sinks of each kind;
// then a barrier, so that nobody leaves before all have received.
int exchange(int rank, Transport& t, std::vector<Connection*>& conns, Store& store, int nranks) {
  const size_t n = conns.size();
  std::vector<std::vector<std::byte>> outs(n);
  std::vector<SendRequest> sends(n);
  std::vector<std::unique_ptr<TestSink>> sinks(n);
  std::vector<RecvRequest> recvs(n);
  for (size_t i = 0; i < n; ++i) {
    const int p = conns[i]->peer();
    outs[i] = make_message(seed_of(rank, p), size_of(rank, p));
    sends[i] = SendRequest{outs[i].data(), outs[i].size()};
    sinks[i] = std::make_unique<TestSink>(static_cast<SinkKind>((p + rank) % 3), size_of(p, rank));
    recvs[i] = RecvRequest{size_of(p, rank), sinks[i].get()};
    conns[i]->post_send(&sends[i]);
    conns[i]->post_recv(&recvs[i]);
  }
  const bool done = drive_until(t, conns, [&] {
    for (size_t i = 0; i < n; ++i) {
      if (!sends[i].complete || !recvs[i].complete) return false;
    }
    return true;
  });
  if (!done) return 5;
  for (size_t i = 0; i < n; ++i) {
    if (first_mismatch(sinks[i]->data, seed_of(conns[i]->peer(), rank)) != -1) return 6;
    if (!sinks[i]->errors.empty()) return 7;
  }
  // The group's store serves only it: a fixed name does.
  store_barrier(store, "exchanged", nranks, Deadline::after(milliseconds(10000)));
  return 0;
}

class UcxProcess : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { use_tls(GetParam()); }
};

TEST_P(UcxProcess, TwoRanksExchange) {
  ProcessGroup group(2, [&](int rank, Transport& t, std::vector<Connection*>& c, Store& s) {
    return exchange(rank, t, c, s, 2);
  });
  EXPECT_EQ(exchange(0, *group.transport, group.conns, group.store(), 2), 0);
  EXPECT_EQ(group.join(1), 0);
}

TEST_P(UcxProcess, ThreeRanksExchange) {
  ProcessGroup group(3, [&](int rank, Transport& t, std::vector<Connection*>& c, Store& s) {
    return exchange(rank, t, c, s, 3);
  });
  EXPECT_EQ(exchange(0, *group.transport, group.conns, group.store(), 3), 0);
  EXPECT_EQ(group.join(1), 0);
  EXPECT_EQ(group.join(2), 0);
}

// The RMA path between processes: both buffers registered, the put crosses address spaces.
TEST_P(UcxProcess, RegisteredBuffersGoByPut) {
  const size_t bytes = (3 << 20) + 64;
  ProcessGroup group(
      2,
      [&](int, Transport& t, std::vector<Connection*>& c, Store&) {
        RegisteredBuffer src(t, bytes, 7);
        auto message = make_message(77, bytes);
        std::memcpy(src.data(), message.data(), bytes);
        SendRequest send{src.data(), bytes, src.region()};
        c[0]->post_send(&send);
        if (!drive_until(t, c, [&] { return send.complete; })) return 5;
        if (stats_of(c[0]).rma_messages != 1) return 6;
        // Stay until rank 0 has seen the done (it follows the flush, so it is on its way).
        TestSink sink(SinkKind::Copy, 0);
        RecvRequest bye{0, &sink};
        c[0]->post_recv(&bye);
        return drive_until(t, c, [&] { return bye.complete; }) ? 0 : 8;
      },
      ucx::UcxOptions{ucx::UcxOptions::Rma::kAlways});
  RegisteredBuffer dst(*group.transport, bytes, 8);
  TestSink sink(SinkKind::Direct, bytes, dst.data());
  RecvRequest recv{bytes, &sink, dst.region()};
  group.conns[0]->post_recv(&recv);
  drive(*group.transport, group.conns, [&] { return recv.complete; });
  EXPECT_EQ(first_mismatch(dst.data(), bytes, 77), -1);
  EXPECT_EQ(stats_of(group.conns[0]).offers_sent, 1u);
  SendRequest bye{nullptr, 0};
  group.conns[0]->post_send(&bye);
  drive(*group.transport, group.conns, [&] { return bye.complete; });
  EXPECT_EQ(group.join(1), 0);
}

// A child killed with SIGKILL while rank 0 waits for its message: RemoteError naming rank 1,
// within 2 s (tcp: the socket closes; shared memory: UCX's keepalive).
TEST_P(UcxProcess, KilledPeerFailsThePendingReceive) {
  ProcessGroup group(2, [&](int, Transport& t, std::vector<Connection*>& c, Store&) {
    // Part of the traffic first, so that the endpoint is in use when it dies.
    std::vector<std::byte> out(1 << 20, std::byte{1});
    SendRequest send{out.data(), out.size()};
    c[0]->post_send(&send);
    drive_until(t, c, [&] { return send.complete; });
    pause();  // killed here
    return 7;
  });
  std::vector<std::byte> first(1 << 20);
  TestSink first_sink(SinkKind::Direct, first.size());
  RecvRequest first_recv{first.size(), &first_sink};
  group.conns[0]->post_recv(&first_recv);
  drive(*group.transport, group.conns, [&] { return first_recv.complete; });
  TestSink sink(SinkKind::Copy, 16 << 20);
  RecvRequest recv{16 << 20, &sink};
  group.conns[0]->post_recv(&recv);
  kill(group.pid(1), SIGKILL);
  const auto start = Clock::now();
  expect_error(
      [&] {
        drive_until(
            *group.transport, group.conns, [] { return false; }, milliseconds(5000));
      },
      cclRemoteError, "rank 1", 1);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_FALSE(recv.complete);
  EXPECT_EQ(group.join(1), -SIGKILL);
}

// A killed idle peer is found by check_health, and a clean exit is not a failure.
TEST_P(UcxProcess, KilledIdlePeerFoundByCheckHealth) {
  ProcessGroup group(3, [&](int rank, Transport& t, std::vector<Connection*>& c, Store& s) {
    if (rank == 2) {
      // Leave cleanly once rank 0 says so: a goodbye, not a failure.
      TestSink sink(SinkKind::Copy, 0);
      RecvRequest go{0, &sink};
      c[0]->post_recv(&go);
      return drive_until(t, c, [&] { return go.complete; }) ? 0 : 5;
    }
    (void)s;
    // Rank 1: connected to everyone (rank 2 may leave now), then killed here.
    SendRequest ready{nullptr, 0};
    c[0]->post_send(&ready);
    if (!drive_until(t, c, [&] { return ready.complete; })) return 5;
    pause();
    return 7;
  });
  TestSink ready_sink(SinkKind::Copy, 0);
  RecvRequest ready{0, &ready_sink};
  group.conns[0]->post_recv(&ready);
  drive(*group.transport, group.conns, [&] { return ready.complete; });
  SendRequest go{nullptr, 0};
  group.conns[1]->post_send(&go);
  drive(*group.transport, group.conns, [&] { return go.complete; });
  EXPECT_EQ(group.join(2), 0);
  kill(group.pid(1), SIGKILL);
  EXPECT_EQ(group.join(1), -SIGKILL);
  const Deadline deadline = Deadline::after(milliseconds(3000));
  bool found = false;
  while (!found && !deadline.expired()) {
    try {
      group.transport->check_health();
      group.transport->wait(milliseconds(20));
    } catch (const Error& e) {
      found = true;
      EXPECT_EQ(e.code(), cclRemoteError);
      EXPECT_EQ(e.culprit(), 1) << e.what();
    }
  }
  EXPECT_TRUE(found);
}

// A failure notice from another process ends the receive waiting for it.
TEST_P(UcxProcess, NoticeFromAnotherProcess) {
  ProcessGroup group(2, [&](int, Transport& t, std::vector<Connection*>& c, Store&) {
    FailureNotice n;
    n.code = cclTimeout;
    n.origin = 1;
    n.culprit = 0;
    t.notify_failure(n);
    // Stay until rank 0 has it: rank 0's goodbye (or its closed endpoint) ends this wait.
    TestSink sink(SinkKind::Copy, 1);
    RecvRequest never{1, &sink};
    c[0]->post_recv(&never);
    try {
      drive_until(
          t, c, [] { return false; }, milliseconds(5000));
    } catch (const Error&) {
      return 0;  // rank 0's goodbye
    }
    return 5;
  });
  TestSink sink(SinkKind::Copy, 100);
  RecvRequest recv{100, &sink};
  group.conns[0]->post_recv(&recv);
  try {
    drive_until(
        *group.transport, group.conns, [] { return false; }, milliseconds(3000));
    ADD_FAILURE() << "no notice";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout) << e.what();
    EXPECT_EQ(e.origin(), 1);
    EXPECT_EQ(e.culprit(), 0);
  }
  group.transport.reset();  // the goodbye
  EXPECT_EQ(group.join(1), 0);
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxProcess, ::testing::Values(kTcpOnly, kDefaultTls),
                         [](const auto& info) { return tls_name(info.param); });

}  // namespace
}  // namespace ccl::transport::ucx_test
