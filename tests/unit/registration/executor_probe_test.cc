// A receive from any source (Executor::probe_any, cclRecvAnySource): the executor asks every
// peer's connection whether that peer has begun a message, round-robin, until one has; it refuses
// where a transport cannot tell or there is no peer, and gives up at the deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/executor.h"
#include "zero_fill_connection.h"

namespace ccl::algo {
namespace {

class ProbeTransport final : public transport::Transport {
 public:
  explicit ProbeTransport(const char* name) : name_(name) {}
  const char* name() const override { return name_; }
  std::vector<transport::Connection*> connect(const transport::SetupContext&,
                                              std::span<const int>) override {
    return {};
  }
  void wait(std::chrono::microseconds timeout) override {
    ++waits;
    std::this_thread::sleep_for(timeout);
  }
  void interrupt() override {}
  void notify_failure(const transport::FailureNotice&) override {}
  void collect_notices(std::vector<std::pair<int, transport::FailureNotice>>&) override {}
  void check_health() override {}

  int waits = 0;

 private:
  const char* name_;
};

// Says a message is in once asked `after` times (never with -1); `probe` false: cannot tell.
class ProbeConnection final : public ZeroFillConnection {
 public:
  ProbeConnection(int peer, int after, bool probe = true)
      : ZeroFillConnection(peer), after_(after), probe_(probe) {}
  bool can_probe() const override { return probe_; }
  bool incoming() override { return after_ >= 0 && ++asked > after_; }
  int asked = 0;

 private:
  int after_;
  bool probe_;
};

const WaitPolicy kNoSpin{std::chrono::microseconds(0), std::chrono::microseconds(0)};
const AbortFlag kRunning{false};

Executor executor_of(std::vector<transport::Connection*> connections, transport::Transport* t) {
  PeerLinks links;
  links.connection = std::move(connections);
  links.transport.assign(links.connection.size(), t);
  return Executor(links, kNoSpin, &kRunning);
}

TEST(ExecutorProbe, TheFirstPeerWhoseMessageArrivesIsTaken) {
  ProbeTransport t("fake");
  ProbeConnection one(1, -1), two(2, 3), three(3, 50);
  Executor executor = executor_of({nullptr, &one, &two, &three}, &t);
  const std::vector<int> peers = executor.probe_peers(0, "test");
  EXPECT_EQ(peers, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(executor.probe_any(peers, Deadline::after(std::chrono::seconds(5)), {"probe", 1}), 2);
  EXPECT_EQ(two.asked, 4);
  EXPECT_GE(t.waits, 3);  // asked again after each sleep, not in a tight loop
}

TEST(ExecutorProbe, PeersWithMessagesTakeTurns) {
  ProbeTransport t("fake");
  ProbeConnection zero(0, 0), two(2, 0);
  Executor executor = executor_of({&zero, nullptr, &two}, &t);
  const std::vector<int> peers = executor.probe_peers(1, "test");
  const Deadline deadline = Deadline::after(std::chrono::seconds(5));
  EXPECT_EQ(executor.probe_any(peers, deadline, {"probe", 1}), 0);
  EXPECT_EQ(executor.probe_any(peers, deadline, {"probe", 2}), 2);  // not 0 again
  EXPECT_EQ(executor.probe_any(peers, deadline, {"probe", 3}), 0);
}

TEST(ExecutorProbe, ATransportThatCannotTellIsNamed) {
  ProbeTransport ib("ib");
  ProbeConnection one(1, 0, /*probe=*/false);
  Executor executor = executor_of({nullptr, &one}, &ib);
  try {
    executor.probe_peers(0, "cclRecvAnySource");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("rank 1 is reached over ib"), std::string::npos)
        << e.what();
  }
}

TEST(ExecutorProbe, NoPeerIsRefused) {
  ProbeTransport t("fake");
  Executor executor = executor_of({nullptr}, &t);
  try {
    executor.probe_peers(0, "cclRecvAnySource");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
  }
}

TEST(ExecutorProbe, NothingArrivingTimesOutNamingThePeers) {
  ProbeTransport t("fake");
  ProbeConnection one(1, -1), two(2, -1);
  Executor executor = executor_of({nullptr, &one, &two}, &t);
  const auto start = std::chrono::steady_clock::now();
  try {
    executor.probe_any(executor.probe_peers(0, "test"),
                       Deadline::after(std::chrono::milliseconds(50)), {"recv from any source", 7});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclTimeout);
    EXPECT_NE(std::string(e.what()).find("ranks 1, 2"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace ccl::algo
