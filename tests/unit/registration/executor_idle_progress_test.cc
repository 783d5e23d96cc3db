// A rank that sleeps in one transport gives turns to another that still holds data of sends it
// called complete (Transport::needs_idle_progress): here the peer the rank waits for answers only
// once those bytes left, as a UCX peer does when its data sits in this rank's UCX buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "algorithms/executor.h"
#include "algorithms/point_to_point.h"
#include "zero_fill_connection.h"

namespace ccl::algo {
namespace {

// Every transport entry point the executor does not use here does nothing.
class FakeTransport final : public transport::Transport {
 public:
  explicit FakeTransport(bool holds_sent_data) : unsettled_(holds_sent_data) {}
  const char* name() const override { return "fake"; }
  std::vector<transport::Connection*> connect(const transport::SetupContext&,
                                              std::span<const int>) override {
    return {};
  }
  void wait(std::chrono::microseconds timeout) override {
    ++waits;
    // Sleeps a little of what it is given: the executor's slice decides how often it comes back.
    std::this_thread::sleep_for(std::min(timeout, std::chrono::microseconds(200)));
  }
  void interrupt() override {}
  void notify_failure(const transport::FailureNotice&) override {}
  void collect_notices(std::vector<std::pair<int, transport::FailureNotice>>&) override {}
  void check_health() override {}
  bool needs_idle_progress() override { return unsettled_; }
  void progress_idle() override {
    ++idle_turns;
    unsettled_ = false;  // the held bytes left
  }

  int waits = 0;
  int idle_turns = 0;

 private:
  bool unsettled_;
};

// A receive that completes only once `gate` had an idle turn: the peer needed those bytes first.
class GatedConnection final : public ZeroFillConnection {
 public:
  GatedConnection(int peer, const FakeTransport& gate) : ZeroFillConnection(peer), gate_(gate) {}

 protected:
  bool ready() const override { return gate_.idle_turns > 0; }

 private:
  const FakeTransport& gate_;
};

void receive_from_peer_1(FakeTransport& sleeper, FakeTransport& holder, Deadline deadline) {
  GatedConnection from_1(1, holder);
  PeerLinks links;
  links.connection = {nullptr, &from_1, nullptr};  // rank 2 has nothing posted in this call
  links.transport = {nullptr, &sleeper, &holder};
  const AbortFlag abort{false};
  Executor executor(links, WaitPolicy{std::chrono::microseconds(0), std::chrono::microseconds(0)},
                    &abort);
  std::vector<std::byte> buffer(64);
  const PointToPoint ops[] = {{false, 1, 64}};
  std::byte* slots[] = {buffer.data()};
  ExecBuffers buffers{nullptr, nullptr, nullptr, slots};
  ExecOp bytes;
  bytes.elem_size = 1;
  executor.run(point_to_point(0, ops), buffers, bytes, deadline, {"recv", 1});
}

TEST(ExecutorIdleProgress, ATransportHoldingSentDataGetsTurnsWhileTheRankSleepsElsewhere) {
  FakeTransport sleeper(false), holder(true);
  receive_from_peer_1(sleeper, holder, Deadline::after(std::chrono::seconds(2)));
  EXPECT_EQ(holder.idle_turns, 1);  // once settled, it is left alone
  EXPECT_GE(sleeper.waits, 1);
  EXPECT_EQ(holder.waits, 0);  // nothing of this call was pending there: no sleep in it
}

TEST(ExecutorIdleProgress, ASettledTransportGetsNoTurns) {
  FakeTransport sleeper(false), holder(false);
  // The gate never opens: the receive times out, and the settled transport was never touched.
  EXPECT_THROW(receive_from_peer_1(sleeper, holder, Deadline::after(std::chrono::milliseconds(50))),
               Error);
  EXPECT_EQ(holder.idle_turns, 0);
}

}  // namespace
}  // namespace ccl::algo
