// Failures: error completions (a killed peer) become RemoteError naming the peer within a
// bounded time; failure notices and goodbyes with failure_notice.h's semantics.
#include "ib_test_util.h"
#include "transport/failure_notice.h"

namespace ccl::transport::ib_test {
namespace {

using std::chrono::milliseconds;

TEST_F(IbTest, AReceiveFromAKilledPeerFailsAtOnce) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("kill-recv"));
  mock_->kill_process(1);
  TestSink sink(SinkKind::Copy, 100);
  RecvRequest recv{100, &sink};
  Connection* c = mesh.conns[0][1];
  c->post_recv(&recv);  // its CTS write fails: transport retry counter exceeded
  const auto start = Clock::now();
  expect_error([&] { drive_until_error(*mesh.transports[0], c); }, cclRemoteError,
               "the connection to rank 1 failed: IBV_WC_RETRY_EXC_ERR", 1);
  EXPECT_LT(Clock::now() - start, milliseconds(500));
  // wait() repeats it while the receive is pending.
  expect_error([&] { mesh.transports[0]->wait(milliseconds(10)); }, cclRemoteError, "rank 1", 1);
}

TEST_F(IbTest, ASendWaitingForAKilledPeerFailsWithinTheProbeInterval) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("kill-send"));
  auto out = make_message(1, 5000);
  SendRequest send{out.data(), out.size()};
  Connection* c = mesh.conns[0][1];
  c->post_send(&send);  // nothing in flight: the peer's CTS never comes
  mock_->kill_process(1);
  const auto start = Clock::now();
  expect_error([&] { drive_until_error(*mesh.transports[0], c); }, cclRemoteError,
               "the connection to rank 1 failed", 1);
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
  EXPECT_FALSE(send.complete);
}

TEST_F(IbTest, AFailureNoticeFailsEveryWaitOfThePeer) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(3, store, unique_tag("notice"));
  // Rank 2 failed, blaming rank 1; rank 0 is idle towards it but waits for nothing else.
  FailureNotice notice;
  notice.code = cclRemoteError;
  notice.origin = 2;
  notice.culprit = 1;
  mesh.transports[2]->notify_failure(notice);
  std::vector<std::pair<int, FailureNotice>> seen;
  mesh.transports[0]->collect_notices(seen);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, 2);
  EXPECT_EQ(seen[0].second.culprit, 1);
  expect_error([&] { mesh.transports[0]->wait(milliseconds(500)); }, cclRemoteError,
               "rank 2 lost rank 1", 1);
  expect_error([&] { mesh.transports[1]->check_health(); }, cclRemoteError, "rank 2 lost rank 1");
}

TEST_F(IbTest, DataSentBeforeANoticeIsStillDelivered) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("drain"));
  auto out = make_message(4, 7000);
  TestSink sink(SinkKind::Copy, out.size());
  RecvRequest recv{out.size(), &sink};
  mesh.conns[0][1]->post_recv(&recv);
  mesh.conns[0][1]->progress();  // the CTS goes out
  SendRequest send{out.data(), out.size()};
  mesh.conns[1][0]->post_send(&send);
  drive(*mesh.transports[1], {mesh.conns[1][0]}, [&] { return send.complete; });
  mesh.transports[1]->notify_failure(notice_for(Error(cclSystemError, "boom"), 1));
  drive(*mesh.transports[0], {mesh.conns[0][1]}, [&] { return recv.complete; });
  EXPECT_EQ(first_mismatch(sink.data, 4), -1);
  expect_error([&] { mesh.transports[0]->wait(milliseconds(100)); }, cclRemoteError,
               "rank 1 failed");
}

TEST_F(IbTest, AnAbortEndsOnlyTheWaitsThatNeedThePeer) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(3, store, unique_tag("abort-notice"));
  mesh.transports[2]->notify_failure(abort_notice(2));
  // Rank 0 waits for rank 1 only: the abort of rank 2 does not end it.
  TestSink sink(SinkKind::Copy, 8);
  RecvRequest from1{8, &sink};
  mesh.conns[0][1]->post_recv(&from1);
  mesh.conns[0][1]->progress();
  EXPECT_NO_THROW(mesh.transports[0]->wait(milliseconds(50)));
  EXPECT_NO_THROW(mesh.transports[0]->wait(milliseconds(50)));
  // Once it needs rank 2, it fails; and an idle peer's check_health sees the abort.
  TestSink sink2(SinkKind::Copy, 8);
  RecvRequest from2{8, &sink2};
  mesh.conns[0][2]->post_recv(&from2);
  expect_error(
      [&] { drive_until_error(*mesh.transports[0], mesh.conns[0][2], milliseconds(2000)); },
      cclRemoteError, "rank 2 aborted its communicator");
  expect_error([&] { mesh.transports[1]->check_health(); }, cclRemoteError, "rank 2 aborted");
}

TEST_F(IbTest, AGoodbyeFailsOnlyAPeerStillWaiting) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(3, store, unique_tag("goodbye"));
  TestSink sink(SinkKind::Copy, 8);
  RecvRequest recv{8, &sink};
  mesh.conns[0][2]->post_recv(&recv);
  mesh.conns[0][2]->progress();
  mesh.transports[2].reset();  // destroyed: says goodbye
  // Idle towards rank 2: healthy.
  EXPECT_NO_THROW(mesh.transports[1]->check_health());
  EXPECT_NO_THROW(mesh.transports[1]->wait(milliseconds(20)));
  const auto start = Clock::now();
  expect_error(
      [&] { drive_until_error(*mesh.transports[0], mesh.conns[0][2], milliseconds(2000)); },
      cclRemoteError, "rank 2 left the communicator", 2);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
}

TEST_F(IbTest, AnIdlePeerKilledIsFoundByCheckHealthsProbe) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("idle-kill"));
  EXPECT_NO_THROW(mesh.transports[0]->check_health());
  mock_->kill_process(1);
  // Nothing posted, nothing in flight: nothing to see yet (as on a real fabric)...
  EXPECT_NO_THROW(mesh.transports[0]->check_health());
  // ...until the connection has been quiet long enough for check_health to probe it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_NO_THROW(mesh.transports[0]->check_health());  // the probe goes out
  expect_error([&] { mesh.transports[0]->check_health(); }, cclRemoteError,
               "the connection to rank 1 failed: IBV_WC_RETRY_EXC_ERR", 1);
}

TEST_F(IbTest, ANoticeToAKilledPeerFailsTheConnection) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("notice-kill"));
  mock_->kill_process(1);
  mesh.transports[0]->notify_failure(abort_notice(0));
  expect_error([&] { mesh.transports[0]->check_health(); }, cclRemoteError,
               "the connection to rank 1 failed", 1);
}

}  // namespace
}  // namespace ccl::transport::ib_test

namespace ccl::transport::ib_test {
namespace {

using std::chrono::milliseconds;

// Progress that may fail: what the peer does after this rank's failure does not matter here.
void try_progress(Transport& t, Connection* c, int rounds = 20) {
  for (int i = 0; i < rounds; ++i) {
    try {
      c->progress();
      t.wait(milliseconds(5));
    } catch (const Error&) {
    }
  }
}

TEST_F(IbTest, AfterNotifyFailureThePeerCannotWriteIntoAnAnnouncedBuffer) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("notice-err"));
  TestSink sink(SinkKind::Direct, 4096);
  RecvRequest recv{sink.data.size(), &sink};
  mesh.conns[0][1]->post_recv(&recv);
  mesh.conns[0][1]->progress();  // the CTS names the sink's buffer
  mesh.transports[0]->notify_failure(notice_for(Error(cclSystemError, "boom"), 0));
  for (uint32_t qp : mock_->qps_of(0)) EXPECT_EQ(mock_->qp_state(qp), IBV_QPS_ERR);
  // Rank 1, slow, now sends into the CTS it got before the notice.
  auto out = make_message(9, sink.data.size());
  SendRequest send{out.data(), out.size()};
  mesh.conns[1][0]->post_send(&send);
  try_progress(*mesh.transports[1], mesh.conns[1][0]);
  EXPECT_FALSE(send.complete);
  for (std::byte b : sink.data) ASSERT_EQ(b, std::byte{0xee}) << "written after the notice";
  std::vector<std::pair<int, FailureNotice>> seen;
  mesh.transports[1]->collect_notices(seen);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, 0);
}

TEST_F(IbTest, AfterAConnectionFailedThePeerCannotWriteIntoAnAnnouncedBuffer) {
  setenv("CCL_IB_QPS_PER_CONNECTION", "2", 1);
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("fail-err"));
  TestSink sink(SinkKind::Direct, 64 * 1024);  // two stripes: one per QP
  RecvRequest recv{sink.data.size(), &sink};
  Connection* c = mesh.conns[0][1];
  c->post_recv(&recv);
  c->progress();  // the CTS names the sink's buffer
  // Rank 1's QP 0 dies; its QP 1 lives on. Rank 0's next CTS fails its connection.
  const auto qps1 = mock_->qps_of(1);
  ASSERT_EQ(qps1.size(), 2u);
  mock_->kill_qp(qps1[0]);
  TestSink sink2(SinkKind::Copy, 8);
  RecvRequest recv2{8, &sink2};
  c->post_recv(&recv2);
  expect_error([&] { drive_until_error(*mesh.transports[0], c, milliseconds(2000)); },
               cclRemoteError, "the connection to rank 1 failed", 1);
  for (uint32_t qp : mock_->qps_of(0)) EXPECT_EQ(mock_->qp_state(qp), IBV_QPS_ERR);
  // Rank 1 still sends the first message: its stripe on QP 1 must not land.
  auto out = make_message(3, sink.data.size());
  SendRequest send{out.data(), out.size()};
  mesh.conns[1][0]->post_send(&send);
  try_progress(*mesh.transports[1], mesh.conns[1][0]);
  for (std::byte b : sink.data) ASSERT_EQ(b, std::byte{0xee}) << "written after the failure";
}

// A device whose QPs hold 3 send WRs and whose CQs are small.
class IbSmallQueueTest : public IbTest {
 protected:
  void add_devices() override {
    MockPort port;
    port.lid = 7;
    MockDevice d{"mlx5_0", {port}};
    d.max_qp_wr = 3;
    mock_->add_device(d);
  }
};

TEST_F(IbSmallQueueTest, ANoticeGoesOutWhileClearToSendsFillTheQueue) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("small-sq"));
  std::vector<std::unique_ptr<TestSink>> sinks;
  std::vector<std::unique_ptr<RecvRequest>> recvs;
  for (int i = 0; i < 6; ++i) {
    sinks.push_back(std::make_unique<TestSink>(SinkKind::Copy, 8));
    recvs.push_back(std::make_unique<RecvRequest>(RecvRequest{8, sinks.back().get()}));
    mesh.conns[0][1]->post_recv(recvs.back().get());
  }
  mesh.conns[0][1]->progress();  // CTS entries take what QP 0's send queue gives them
  FailureNotice notice;
  notice.code = cclSystemError;
  notice.origin = 0;
  mesh.transports[0]->notify_failure(notice);
  std::vector<std::pair<int, FailureNotice>> seen;
  mesh.transports[1]->collect_notices(seen);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, 0);
  EXPECT_EQ(seen[0].second.code, cclSystemError);
}

TEST_F(IbSmallQueueTest, MessagesStillFlowThroughTinyQueues) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("small-flow"));
  constexpr int kMessages = 10;
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::unique_ptr<TestSink>> sinks;
  std::vector<std::unique_ptr<RecvRequest>> recvs;
  std::vector<std::unique_ptr<SendRequest>> sends;
  for (int i = 0; i < kMessages; ++i) {
    outs.push_back(make_message(i, 3000 + i));
    sinks.push_back(std::make_unique<TestSink>(SinkKind::Copy, outs.back().size()));
    recvs.push_back(
        std::make_unique<RecvRequest>(RecvRequest{outs.back().size(), sinks.back().get()}));
    sends.push_back(
        std::make_unique<SendRequest>(SendRequest{outs.back().data(), outs.back().size()}));
    mesh.conns[0][1]->post_recv(recvs.back().get());
    mesh.conns[1][0]->post_send(sends.back().get());
  }
  run_ranks(2, [&](int rank) {
    drive(*mesh.transports[rank], {mesh.conns[rank][1 - rank]}, [&] {
      for (int i = 0; i < kMessages; ++i) {
        if (rank == 0 ? !recvs[i]->complete : !sends[i]->complete) return false;
      }
      return true;
    });
  });
  for (int i = 0; i < kMessages; ++i) EXPECT_EQ(first_mismatch(sinks[i]->data, i), -1) << i;
}

// max_cqe below what the QPs' depths need: the depths shrink, the CQ never overflows.
class IbSmallCqTest : public IbTest {
 protected:
  void add_devices() override {
    MockPort port;
    port.lid = 7;
    MockDevice d{"mlx5_0", {port}};
    d.max_cqe = 40;
    mock_->add_device(d);
  }
};

TEST_F(IbSmallCqTest, ManyMessagesDoNotOverflowASmallCq) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("small-cq"));
  constexpr int kMessages = 64;
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::unique_ptr<TestSink>> sinks;
  std::vector<std::unique_ptr<RecvRequest>> recvs;
  std::vector<std::unique_ptr<SendRequest>> sends;
  for (int i = 0; i < kMessages; ++i) {
    outs.push_back(make_message(i, 100));
    sinks.push_back(std::make_unique<TestSink>(SinkKind::Copy, 100));
    recvs.push_back(std::make_unique<RecvRequest>(RecvRequest{100, sinks.back().get()}));
    sends.push_back(std::make_unique<SendRequest>(SendRequest{outs.back().data(), 100}));
    mesh.conns[0][1]->post_recv(recvs.back().get());
    mesh.conns[1][0]->post_send(sends.back().get());
  }
  // Rank 1 posts every write it can before rank 0 polls at all, and the reverse.
  for (int round = 0; round < 2000; ++round) {
    bool done = true;
    for (int i = 0; i < kMessages; ++i) done &= recvs[i]->complete && sends[i]->complete;
    if (done) break;
    mesh.conns[0][1]->progress();
    mesh.conns[1][0]->progress();
  }
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(recvs[i]->complete && sends[i]->complete) << i;
    EXPECT_EQ(first_mismatch(sinks[i]->data, i), -1) << i;
  }
}

}  // namespace
}  // namespace ccl::transport::ib_test
