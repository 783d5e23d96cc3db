// Ad-hoc measurements of the shm transport between two threads (printed, never asserted):
// one-way throughput of a 64 MiB message and the round trip of an 8-byte ping-pong.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "shm_harness.h"

namespace ccl::test {
namespace {

using namespace std::chrono_literals;
using transport::RecvRequest;
using transport::SendRequest;
using Clock = std::chrono::steady_clock;

class MemcpySink : public transport::RecvSink {
 public:
  explicit MemcpySink(std::byte* destination) : destination_(destination) {}
  void consume(const std::byte* piece, size_t offset, size_t length) override {
    memcpy(destination_ + offset, piece, length);
  }

 private:
  std::byte* destination_;
};

// Like the executor: poll progress for `spin`, then sleep in wait().
void run_until(RankEnv& env, transport::Connection* c, const bool& done,
               std::chrono::microseconds spin) {
  auto spin_until = Clock::now() + spin;
  while (!done) {
    if (c->progress()) {
      spin_until = Clock::now() + spin;
      continue;
    }
    if (done) break;
    if (Clock::now() < spin_until) continue;
    env.transport->wait(100ms);
    spin_until = Clock::now() + spin;
  }
}

TEST(ShmPerf, ThroughputAndPingPong) {
  constexpr size_t kBytes = 64u << 20;
  constexpr int kReps = 5;
  constexpr int kPings = 5000;
  ThreadBarrier barrier(2);
  double best_gbps = 0, total_seconds = 0;
  double rtt_spin_us = 0, rtt_sleep_us = 0;
  auto errors = run_shm_threads(2, {}, [&](RankEnv& env) {
    transport::Connection* peer = env.by_peer[1 - env.rank];
    std::vector<std::byte> buffer(kBytes, std::byte{1});  // touched: no page faults in timing
    for (int rep = 0; rep <= kReps; ++rep) {
      barrier.arrive_and_wait(20s);
      auto start = Clock::now();
      if (env.rank == 0) {
        SendRequest send{buffer.data(), kBytes};
        peer->post_send(&send);
        run_until(env, peer, send.complete, 20us);
      } else {
        MemcpySink sink(buffer.data());
        RecvRequest recv{kBytes, &sink};
        peer->post_recv(&recv);
        run_until(env, peer, recv.complete, 20us);
        double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (rep > 0) {  // rep 0 warms up
          total_seconds += seconds;
          best_gbps = std::max(best_gbps, kBytes / seconds / 1e9);
        }
      }
    }
    for (auto spin : {std::chrono::microseconds(20), std::chrono::microseconds(0)}) {
      std::byte ping[8] = {};
      barrier.arrive_and_wait(20s);
      auto start = Clock::now();
      for (int i = 0; i < kPings; ++i) {
        SendRequest send{ping, sizeof(ping)};
        MemcpySink sink(ping);
        RecvRequest recv{sizeof(ping), &sink};
        if (env.rank == 0) {
          peer->post_send(&send);
          peer->post_recv(&recv);
        } else {
          peer->post_recv(&recv);
          run_until(env, peer, recv.complete, spin);
          peer->post_send(&send);
        }
        run_until(env, peer, recv.complete, spin);
        run_until(env, peer, send.complete, spin);
      }
      double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kPings;
      if (env.rank == 0) (spin.count() > 0 ? rtt_spin_us : rtt_sleep_us) = us;
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  double avg_gbps = kBytes * kReps / total_seconds / 1e9;
  printf("[perf] shm 64 MiB one-way between two threads: best %.2f GB/s, mean %.2f GB/s\n",
         best_gbps, avg_gbps);
  printf("[perf] shm 8-byte ping-pong round trip: %.2f us (spin 20 us), %.2f us (futex only)\n",
         rtt_spin_us, rtt_sleep_us);
  RecordProperty("throughput_64MiB_GBps", std::to_string(best_gbps));
  RecordProperty("pingpong_rtt_us", std::to_string(rtt_spin_us));
}

}  // namespace
}  // namespace ccl::test
