// The in-process loopback transport.
#include "transport/loopback/loopback_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "shm_harness.h"

namespace ccl::test {
namespace {

using namespace std::chrono_literals;
using transport::LoopbackFabric;
using transport::RecvRequest;
using transport::SendRequest;

struct LoopbackRank {
  std::unique_ptr<transport::Transport> transport;
  std::vector<transport::Connection*> by_peer;
};

LoopbackRank connect_loopback(std::shared_ptr<LoopbackFabric> fabric, int rank) {
  int nranks = fabric->nranks();
  LoopbackRank result;
  result.transport = transport::make_loopback_transport(std::move(fabric), rank);
  transport::SetupContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  std::vector<int> peers;
  for (int r = 0; r < nranks; ++r) {
    if (r != rank) peers.push_back(r);
  }
  auto connections = result.transport->connect(ctx, peers);
  result.by_peer.assign(nranks, nullptr);
  for (size_t i = 0; i < peers.size(); ++i) result.by_peer[peers[i]] = connections[i];
  return result;
}

// Runs body(rank) on `nranks` threads; returns the errors.
std::vector<std::string> run_threads(int nranks, const std::function<void(int)>& body) {
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void expect_all_ok(const std::vector<std::string>& errors) {
  for (size_t i = 0; i < errors.size(); ++i) EXPECT_EQ(errors[i], "") << "rank " << i;
}

void matrix(int nranks, size_t piece_bytes) {
  auto fabric = std::make_shared<LoopbackFabric>(nranks, piece_bytes);
  expect_all_ok(run_threads(nranks, [&](int rank) {
    LoopbackRank me = connect_loopback(fabric, rank);
    exchange_matrix(*me.transport, me.by_peer, rank, nranks, matrix_sizes(piece_bytes),
                    Deadline::after(20s));
  }));
}

TEST(Loopback, MatrixFourRanks) { matrix(4, 64 * 1024); }
TEST(Loopback, MatrixTwoRanksSmallPieces) { matrix(2, 64); }

TEST(Loopback, SizeMismatchDetected) {
  auto fabric = std::make_shared<LoopbackFabric>(2);
  LoopbackRank a = connect_loopback(fabric, 0);
  LoopbackRank b = connect_loopback(fabric, 1);
  std::vector<std::byte> data(100);
  SendRequest send{data.data(), 100};
  a.by_peer[1]->post_send(&send);
  EXPECT_TRUE(send.complete);
  CopySink sink(data.data(), 50);
  RecvRequest recv{50, &sink};
  b.by_peer[0]->post_recv(&recv);
  try {
    b.by_peer[0]->progress();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInternalError);
    EXPECT_STREQ(e.what(), "message size mismatch with rank 0: expected 50 bytes, peer sent 100");
  }
}

TEST(Loopback, FailedRankDrainsThenErrors) {
  auto fabric = std::make_shared<LoopbackFabric>(2);
  LoopbackRank a = connect_loopback(fabric, 0);
  LoopbackRank b = connect_loopback(fabric, 1);
  std::vector<std::byte> data(10);
  SendRequest send{data.data(), 10};
  a.by_peer[1]->post_send(&send);
  fabric->fail_rank(0);
  CopySink sink(data.data(), 10);
  RecvRequest first{10, &sink};
  b.by_peer[0]->post_recv(&first);
  drive(
      *b.transport, b.by_peer, [&] { return first.complete; }, Deadline::after(5s));
  RecvRequest second{10, &sink};
  b.by_peer[0]->post_recv(&second);
  try {
    drive(
        *b.transport, b.by_peer, [&] { return second.complete; }, Deadline::after(5s));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclRemoteError);
    EXPECT_STREQ(e.what(), "rank 0 exited");
  }
}

TEST(Loopback, InterruptReleasesWaiter) {
  auto fabric = std::make_shared<LoopbackFabric>(2);
  LoopbackRank a = connect_loopback(fabric, 0);
  std::byte byte;
  CopySink sink(&byte, 1);
  RecvRequest recv{1, &sink};
  a.by_peer[1]->post_recv(&recv);
  std::thread interrupter([&] {
    std::this_thread::sleep_for(100ms);
    a.transport->interrupt();
  });
  auto start = std::chrono::steady_clock::now();
  a.transport->wait(20s);
  interrupter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_FALSE(recv.complete);
}

TEST(Loopback, BadPeersRejected) {
  auto fabric = std::make_shared<LoopbackFabric>(2);
  auto t = transport::make_loopback_transport(fabric, 0);
  transport::SetupContext ctx;
  for (std::vector<int> peers : {std::vector<int>{0}, {2}, {-1}}) {
    EXPECT_THROW(t->connect(ctx, peers), Error);
  }
  EXPECT_THROW(transport::make_loopback_transport(fabric, 2), Error);
  EXPECT_THROW(LoopbackFabric(2, 100), Error);
}

}  // namespace
}  // namespace ccl::test
