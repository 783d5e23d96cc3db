// Failures between ranks on threads: size mismatch, a peer that closes (after draining what it
// sent), pending work towards a closed peer, and wait()'s interrupt, abort and timeout.
#include <gtest/gtest.h>

#include "tcp_test_util.h"

namespace ccl::transport::tcp_test {
namespace {

using std::chrono::milliseconds;

void expect_size_mismatch(size_t sent, size_t expected) {
  use_loopback();
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("mismatch"));
  auto out = make_message(1, sent);
  SendRequest send{out.data(), sent};
  mesh.conns[0][1]->post_send(&send);
  drive(*mesh.transports[0], {mesh.conns[0][1]}, [&] { return send.complete; });
  TestSink sink(SinkKind::Copy, expected);
  RecvRequest recv{expected, &sink};
  Connection* c = mesh.conns[1][0];
  c->post_recv(&recv);
  std::string text = "message size mismatch with rank 0: expected " + std::to_string(expected) +
                     " bytes, peer sent " + std::to_string(sent);
  expect_error([&] { drive_until_error(*mesh.transports[1], c); }, cclInternalError, text);
  EXPECT_FALSE(recv.complete);
  EXPECT_EQ(sink.pieces, 0u);  // nothing of a mismatched message reaches the sink
  // The connection stays failed: both progress() and wait() repeat the error.
  expect_error([&] { c->progress(); }, cclInternalError, text);
  expect_error([&] { mesh.transports[1]->wait(milliseconds(10)); }, cclInternalError, text);
}

TEST(TcpFailure, PeerSentMoreThanPosted) { expect_size_mismatch(100, 64); }
TEST(TcpFailure, PeerSentLessThanPosted) { expect_size_mismatch(10, 4096); }
TEST(TcpFailure, PeerSentSomethingForAnEmptyReceive) { expect_size_mismatch(1, 0); }

// A peer that sent its messages and then closed: they are all delivered; only a receive beyond
// them fails, and wait() reports it.
TEST(TcpFailure, DataSentBeforeACloseIsDelivered) {
  use_loopback();
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("drain"));
  auto a = make_message(1, 5000), b = make_message(2, 0), c = make_message(3, 40000);
  {
    SendRequest sa{a.data(), a.size()}, sb{b.data(), 0}, sc{c.data(), c.size()};
    Connection* s = mesh.conns[1][0];
    s->post_send(&sa);
    s->post_send(&sb);
    s->post_send(&sc);
    drive(*mesh.transports[1], {s}, [&] { return sc.complete; });
    mesh.transports[1].reset();  // closes the socket with everything in the kernel
  }
  Connection* r = mesh.conns[0][1];
  Transport& t = *mesh.transports[0];
  // Closed but nothing posted: not an error.
  EXPECT_FALSE(r->busy());
  EXPECT_NO_THROW(t.wait(milliseconds(20)));
  TestSink ka(SinkKind::AlignCheck, a.size()), kb(SinkKind::Copy, 0),
      kc(SinkKind::AlignCheck, c.size());
  RecvRequest ra{a.size(), &ka}, rb{0, &kb}, rc{c.size(), &kc};
  r->post_recv(&ra);
  r->post_recv(&rb);
  r->post_recv(&rc);
  drive(t, {r}, [&] { return rc.complete; });
  EXPECT_EQ(first_mismatch(ka.data, 1), -1);
  EXPECT_EQ(first_mismatch(kc.data, 3), -1);
  EXPECT_TRUE(ka.errors.empty() && kc.errors.empty());
  TestSink kd(SinkKind::Copy, 8);
  RecvRequest rd{8, &kd};
  r->post_recv(&rd);
  auto start = Clock::now();
  expect_error([&] { t.wait(milliseconds(2000)); }, cclRemoteError, "connection to rank 1 (");
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
}

// Sending to a peer that is gone fails once the kernel learns of it.
TEST(TcpFailure, SendToAClosedPeerFails) {
  use_loopback();
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("epipe"));
  mesh.transports[1].reset();
  auto out = make_message(1, 16 << 20);
  SendRequest send{out.data(), out.size()};
  Connection* c = mesh.conns[0][1];
  c->post_send(&send);
  auto start = Clock::now();
  expect_error([&] { drive_until_error(*mesh.transports[0], c); }, cclRemoteError, "rank 1");
  EXPECT_FALSE(send.complete);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
}

TEST(TcpWait, InterruptReleasesAWait) {
  use_loopback();
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("interrupt"));
  TestSink sink(SinkKind::Copy, 10);
  RecvRequest recv{10, &sink};
  mesh.conns[0][1]->post_recv(&recv);  // never satisfied: wait() has a socket to sleep on
  Transport& t = *mesh.transports[0];
  std::thread waker([&] {
    std::this_thread::sleep_for(milliseconds(100));
    t.interrupt();
  });
  auto start = Clock::now();
  t.wait(std::chrono::seconds(20));
  auto took = Clock::now() - start;
  waker.join();
  EXPECT_LT(took, std::chrono::seconds(5));
  // An interrupt that comes before the wait is not lost, and "forever" is a valid timeout.
  t.interrupt();
  start = Clock::now();
  t.wait(std::chrono::microseconds::max());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_FALSE(recv.complete);
}

TEST(TcpWait, AbortFlagReleasesAWait) {
  use_loopback();
  InMemoryStore store;
  AbortFlag abort{false};
  std::string tag = unique_tag("abort-wait");
  std::vector<std::unique_ptr<Transport>> t(2);
  run_ranks(2, [&](int rank) {
    SetupContext ctx = make_context(rank, 2, tag, &store, milliseconds(10000), &abort);
    t[rank] = make_tcp_transport(ctx);
    int peer = 1 - rank;
    t[rank]->connect(ctx, std::span<const int>(&peer, 1));
  });
  abort = true;
  auto start = Clock::now();
  t[0]->wait(std::chrono::seconds(20));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(TcpWait, TimesOutWithNothingToDo) {
  use_loopback();
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("idle"));
  auto start = Clock::now();
  mesh.transports[0]->wait(milliseconds(30));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(mesh.conns[0][1]->progress());
}

}  // namespace
}  // namespace ccl::transport::tcp_test
