// Failure notices between ucx transports of one process: a kFailed notice ends every wait of the
// peer; a kAborted one only a wait that needs the aborting rank, and check_health; a goodbye
// (a destroyed transport) fails only a rank that still expects something of it.
#include <gtest/gtest.h>

#include <thread>

#include "transport/failure_notice.h"
#include "ucx_test_util.h"

namespace ccl::transport::ucx_test {
namespace {

using std::chrono::milliseconds;

class UcxFailure : public ::testing::Test {
 protected:
  void SetUp() override { use_tls(kTcpOnly); }
};

FailureNotice failed_notice(int origin, int culprit) {
  FailureNotice n;
  n.code = cclRemoteError;
  n.kind = FailureNotice::kFailed;
  n.origin = origin;
  n.culprit = culprit;
  return n;
}

// Waits on rank `rank` (progress + wait) until it throws; the error, or none after `timeout`.
std::optional<Error> error_of_wait(Mesh& mesh, int rank, milliseconds timeout) {
  const Deadline deadline = Deadline::after(timeout);
  try {
    while (!deadline.expired()) {
      for (Connection* c : mesh.peers_of(rank)) c->progress();
      mesh.transports[rank]->wait(milliseconds(20));
    }
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

TEST_F(UcxFailure, FailedNoticeEndsAPendingReceive) {
  Mesh mesh(3);
  ASSERT_TRUE(mesh.ok());
  TestSink sink(SinkKind::Copy, 100);
  RecvRequest recv{100, &sink};
  mesh.conn(1, 0)->post_recv(&recv);
  mesh.transports[0]->notify_failure(failed_notice(0, 2));
  auto error = error_of_wait(mesh, 1, milliseconds(3000));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), cclRemoteError) << error->what();
  EXPECT_EQ(error->culprit(), 2) << error->what();
  EXPECT_EQ(error->origin(), 0) << error->what();
  // Everyone connected to rank 0 can see the notice.
  std::vector<std::pair<int, FailureNotice>> notices;
  mesh.transports[2]->collect_notices(notices);
  for (int i = 0; i < 100 && notices.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    mesh.transports[2]->collect_notices(notices);
  }
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].first, 0);
  EXPECT_EQ(notices[0].second.culprit, 2);
  EXPECT_EQ(notices[0].second.kind, FailureNotice::kFailed);
}

// kFailed ends a wait even where nothing is pending with the origin (its operation cannot
// complete without it, through others), once.
TEST_F(UcxFailure, FailedNoticeEndsAnIdleWaitOnce) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  mesh.transports[0]->notify_failure(failed_notice(0, -1));
  auto error = error_of_wait(mesh, 1, milliseconds(3000));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->origin(), 0);
  EXPECT_FALSE(error_of_wait(mesh, 1, milliseconds(200)).has_value());
  EXPECT_THROW(mesh.transports[1]->check_health(), Error);
}

TEST_F(UcxFailure, AbortNoticeEndsOnlyWaitsThatNeedTheRank) {
  Mesh mesh(3);
  ASSERT_TRUE(mesh.ok());
  mesh.transports[0]->notify_failure(abort_notice(0));
  // Rank 2 needs only rank 1: its wait goes on.
  std::vector<std::byte> out = make_message(1, 500);
  SendRequest send{out.data(), 500};
  TestSink sink2(SinkKind::Copy, 500);
  RecvRequest recv2{500, &sink2};
  mesh.conn(2, 1)->post_recv(&recv2);
  EXPECT_FALSE(error_of_wait(mesh, 2, milliseconds(300)).has_value());
  mesh.conn(1, 2)->post_send(&send);
  mesh.drive_all([&] { return recv2.complete && send.complete; });
  // Rank 1 needs rank 0: its receive fails, naming the abort.
  TestSink sink1(SinkKind::Copy, 10);
  RecvRequest recv1{10, &sink1};
  mesh.conn(1, 0)->post_recv(&recv1);
  auto error = error_of_wait(mesh, 1, milliseconds(3000));
  ASSERT_TRUE(error.has_value());
  EXPECT_TRUE(error->origin_aborted()) << error->what();
  EXPECT_NE(std::string(error->what()).find("aborted"), std::string::npos) << error->what();
  // An idle rank learns of it in check_health.
  EXPECT_THROW(mesh.transports[2]->check_health(), Error);
}

TEST_F(UcxFailure, GoodbyeFailsOnlyARankThatExpectsSomething) {
  Mesh mesh(3);
  ASSERT_TRUE(mesh.ok());
  TestSink sink(SinkKind::Copy, 10);
  RecvRequest recv{10, &sink};
  mesh.conn(1, 0)->post_recv(&recv);
  mesh.transports[0].reset();  // a clean destroy: goodbyes to ranks 1 and 2
  auto error = error_of_wait(mesh, 1, milliseconds(3000));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), cclRemoteError);
  EXPECT_EQ(error->culprit(), 0) << error->what();
  // Rank 2 expected nothing of rank 0: healthy.
  for (int i = 0; i < 20; ++i) {
    EXPECT_NO_THROW(mesh.transports[2]->check_health());
    mesh.transports[2]->wait(milliseconds(10));
  }
  std::vector<std::pair<int, FailureNotice>> notices;
  mesh.transports[2]->collect_notices(notices);
  EXPECT_TRUE(notices.empty());
}

// A goodbye overtakes data the receiver has not matched yet (eager chunks in UCX's queue, a
// receive posted late): every message the peer completed before it left is still delivered.
TEST_F(UcxFailure, GoodbyeDoesNotOvertakeDeliveredData) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  constexpr int kMessages = 64;
  constexpr size_t kBytes = 4000;
  std::vector<std::vector<std::byte>> out(kMessages);
  std::vector<SendRequest> sends(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    out[i] = make_message(static_cast<uint32_t>(100 + i), kBytes);
    sends[i] = SendRequest{out[i].data(), kBytes};
    mesh.conn(1, 0)->post_send(&sends[i]);
  }
  // Eager: complete at the sender without the receiver.
  ASSERT_TRUE(drive_until(*mesh.transports[1], mesh.peers_of(1), [&] {
    for (const SendRequest& s : sends) {
      if (!s.complete) return false;
    }
    return true;
  }));
  std::thread leaver([&] { mesh.transports[1].reset(); });  // goodbye at once
  // Rank 0 progresses meanwhile (the goodbye and the endpoint error arrive), its receives late.
  for (int i = 0; i < 20; ++i) {
    EXPECT_NO_THROW(mesh.transports[0]->check_health());
    mesh.transports[0]->wait(milliseconds(10));
  }
  leaver.join();
  std::vector<std::unique_ptr<TestSink>> sinks(kMessages);
  std::vector<RecvRequest> recvs(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    sinks[i] = std::make_unique<TestSink>(SinkKind::Copy, kBytes);
    recvs[i] = RecvRequest{kBytes, sinks[i].get()};
    mesh.conn(0, 1)->post_recv(&recvs[i]);
  }
  drive(
      *mesh.transports[0], {mesh.conn(0, 1)},
      [&] {
        for (const RecvRequest& r : recvs) {
          if (!r.complete) return false;
        }
        return true;
      },
      std::chrono::seconds(5));
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_EQ(first_mismatch(sinks[i]->data, static_cast<uint32_t>(100 + i)), -1) << i;
  }
  // A receive of a message it never sent fails, naming it.
  TestSink extra_sink(SinkKind::Copy, 10);
  RecvRequest extra{10, &extra_sink};
  mesh.conn(0, 1)->post_recv(&extra);
  auto error = error_of_wait(mesh, 0, milliseconds(3000));
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->culprit(), 1) << error->what();
}

// Destroying a transport does not wait for its peers (UCX 1.13's flushing close would wait for an
// idle peer to progress: 1 s, the close bound, before closes were forced).
TEST_F(UcxFailure, DestroyDoesNotWaitForAnIdlePeer) {
  Mesh mesh(3);
  ASSERT_TRUE(mesh.ok());
  const auto start = Clock::now();
  mesh.transports[0].reset();
  EXPECT_LT(Clock::now() - start, milliseconds(300));
}

TEST_F(UcxFailure, NoticeIsSentOnce) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  mesh.transports[0]->notify_failure(failed_notice(0, 1));
  mesh.transports[0]->notify_failure(failed_notice(0, 5));  // ignored: one notice per peer
  // collect_notices() progresses without throwing (a wait() would throw the kFailed notice).
  std::vector<std::pair<int, FailureNotice>> notices;
  for (int i = 0; i < 100 && notices.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    mesh.transports[1]->collect_notices(notices);
  }
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].second.culprit, 1);
}

}  // namespace
}  // namespace ccl::transport::ucx_test
