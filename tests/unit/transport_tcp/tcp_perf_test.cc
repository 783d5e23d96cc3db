// Ad hoc loopback figures, printed for the record (no timing assertions): a 64 MiB one-way
// transfer into a direct destination and through a copying sink, and an 8-byte ping-pong, for
// each socket configuration (CCL_SOCKET_NTHREADS x CCL_NSOCKS_PERTHREAD) of kPerfConfigs.
#include <gtest/gtest.h>

#include <cstdio>

#include "tcp_test_util.h"

namespace ccl::transport::tcp_test {
namespace {

using Seconds = std::chrono::duration<double>;

// Rank 0 sends `out` to rank 1's sink once; the receiver's time from posting to completion.
double transfer_seconds(Mesh& mesh, const std::vector<std::byte>& out, TestSink& sink) {
  double seconds = 0;
  run_ranks(2, [&](int rank) {
    Connection* c = mesh.conns[rank][1 - rank];
    auto start = Clock::now();
    if (rank == 0) {
      SendRequest send{out.data(), out.size()};
      c->post_send(&send);
      drive(*mesh.transports[0], {c}, [&] { return send.complete; });
    } else {
      RecvRequest recv{out.size(), &sink};
      c->post_recv(&recv);
      drive(*mesh.transports[1], {c}, [&] { return recv.complete; });
      seconds = Seconds(Clock::now() - start).count();
    }
  });
  return seconds;
}

const SocketConfig kPerfConfigs[] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 1}, {2, 2}, {4, 1}};

// Disabled: run with --gtest_also_run_disabled_tests --gtest_filter=*TcpPerf*
TEST(TcpPerf, DISABLED_LoopbackThroughputAndLatency) {
  use_loopback();
  for (const SocketConfig& config : kPerfConfigs) {
    ScopedSocketConfig scoped(config);
    std::printf("[tcp perf] %s (threads x sockets per thread):\n", config.name().c_str());
    InMemoryStore store;
    Mesh mesh = Mesh::make(2, store, unique_tag("perf"));
    const size_t bytes = 64 << 20;
    std::vector<std::byte> out(bytes, std::byte{3});
    TestSink direct(SinkKind::Direct, bytes), copy(SinkKind::Copy, bytes);
    double best_direct = 1e9, best_copy = 1e9;
    for (int i = 0; i < 4; ++i) {  // interleaved, so that a burst of load hits both alike
      best_direct = std::min(best_direct, transfer_seconds(mesh, out, direct));
      best_copy = std::min(best_copy, transfer_seconds(mesh, out, copy));
    }
    EXPECT_EQ(direct.data[bytes - 1], std::byte{3});
    EXPECT_EQ(copy.data[bytes - 1], std::byte{3});
    std::printf(
        "[tcp perf] 64 MiB one way: %.2f GB/s into a direct destination, %.2f GB/s through "
        "a copying sink (best of 4)\n",
        bytes / best_direct / 1e9, bytes / best_copy / 1e9);
    const int iterations = 2000;
    double rtt = 0;
    run_ranks(2, [&](int rank) {
      Connection* c = mesh.conns[rank][1 - rank];
      uint64_t value = 0;
      auto start = Clock::now();
      for (int i = 0; i < iterations; ++i) {
        TestSink sink(SinkKind::Direct, 8);
        RecvRequest recv{8, &sink};
        SendRequest send{reinterpret_cast<const std::byte*>(&value), 8};
        if (rank == 0) {  // sends, then waits for the value + 1
          c->post_send(&send);
          c->post_recv(&recv);
          drive(*mesh.transports[0], {c}, [&] { return recv.complete && send.complete; });
          std::memcpy(&value, sink.data.data(), 8);
        } else {  // answers with what it got + 1
          c->post_recv(&recv);
          drive(*mesh.transports[1], {c}, [&] { return recv.complete; });
          std::memcpy(&value, sink.data.data(), 8);
          ++value;
          c->post_send(&send);
          drive(*mesh.transports[1], {c}, [&] { return send.complete; });
        }
      }
      if (rank == 0) {
        rtt = Seconds(Clock::now() - start).count() / iterations;
        EXPECT_EQ(value, static_cast<uint64_t>(iterations));
      }
    });
    std::printf("[tcp perf] 8-byte ping-pong round trip: %.1f us\n", rtt * 1e6);
  }
}

}  // namespace
}  // namespace ccl::transport::tcp_test
