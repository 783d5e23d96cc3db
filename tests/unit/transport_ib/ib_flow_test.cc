// Receiver-driven flow control: more messages than FIFO slots, a receiver that posts late (the
// sender sleeps in wait() until the CTS wakes it), size checks, and wait()'s bounds.
#include "ib_test_util.h"
#include "transport/ib/ib_wire.h"

namespace ccl::transport::ib_test {
namespace {

using std::chrono::milliseconds;

TEST_F(IbTest, MoreMessagesThanFifoSlotsWaitTheirTurn) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("fifo"));
  const int count = 3 * ib::kFifoSlots + 5;
  std::vector<std::vector<std::byte>> out;
  std::vector<SendRequest> sends(count);
  for (int i = 0; i < count; ++i) {
    out.push_back(make_message(i, 100 + 37 * i));
    sends[i] = SendRequest{out[i].data(), out[i].size()};
    mesh.conns[0][1]->post_send(&sends[i]);
  }
  // Nothing can move before the receiver asks.
  for (int i = 0; i < 5; ++i) mesh.conns[0][1]->progress();
  EXPECT_FALSE(sends[0].complete);
  std::vector<std::unique_ptr<TestSink>> sinks;
  std::vector<RecvRequest> recvs(count);
  // Receives posted in batches, the sender progressing in between: never more in flight than
  // the FIFO holds, and every message lands in its own sink.
  for (int i = 0; i < count; ++i) {
    sinks.push_back(
        std::make_unique<TestSink>(i % 2 ? SinkKind::Direct : SinkKind::Copy, out[i].size()));
    recvs[i] = RecvRequest{out[i].size(), sinks.back().get()};
    mesh.conns[1][0]->post_recv(&recvs[i]);
    if (i % 7 == 6) {
      mesh.conns[1][0]->progress();
      mesh.conns[0][1]->progress();
    }
  }
  run_ranks(2, [&](int rank) {
    drive(*mesh.transports[rank], {mesh.conns[rank][1 - rank]},
          [&] { return rank == 0 ? sends[count - 1].complete : recvs[count - 1].complete; });
  });
  for (int i = 0; i < count; ++i) {
    EXPECT_TRUE(sends[i].complete && recvs[i].complete) << i;
    EXPECT_EQ(first_mismatch(sinks[i]->data, i), -1) << "message " << i;
  }
}

TEST_F(IbTest, ALateReceiverWakesTheSleepingSender) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("late"));
  auto out = make_message(5, 300000);
  SendRequest send{out.data(), out.size()};
  TestSink sink(SinkKind::AlignCheck, out.size());
  RecvRequest recv{out.size(), &sink};
  mesh.conns[0][1]->post_send(&send);
  Clock::duration woke_after{};
  std::thread receiver([&] {
    MockVerbs::set_thread_process(1);
    std::this_thread::sleep_for(milliseconds(200));
    mesh.conns[1][0]->post_recv(&recv);
    drive(*mesh.transports[1], {mesh.conns[1][0]}, [&] { return recv.complete; });
  });
  // The sender: nothing to do until the CTS arrives; one long wait() ends when it does.
  const auto start = Clock::now();
  mesh.conns[0][1]->progress();
  Deadline deadline = Deadline::after(milliseconds(5000));
  while (!send.complete && !deadline.expired()) {
    mesh.transports[0]->wait(std::chrono::seconds(5));
    if (woke_after == Clock::duration{}) woke_after = Clock::now() - start;
    mesh.conns[0][1]->progress();
  }
  receiver.join();
  EXPECT_TRUE(send.complete);
  EXPECT_GE(woke_after, milliseconds(150));
  EXPECT_LT(woke_after, milliseconds(2000));
  EXPECT_EQ(first_mismatch(sink.data, 5), -1);
  EXPECT_TRUE(sink.errors.empty());
}

void expect_size_mismatch(size_t sent, size_t expected) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("mismatch"));
  auto out = make_message(1, sent);
  SendRequest send{out.data(), sent};
  TestSink sink(SinkKind::Copy, expected);
  RecvRequest recv{expected, &sink};
  mesh.conns[0][1]->post_send(&send);
  mesh.conns[1][0]->post_recv(&recv);
  const std::string sender_text = "message size mismatch with rank 1: sending " +
                                  std::to_string(sent) + " bytes, the peer expects " +
                                  std::to_string(expected);
  const std::string receiver_text =
      "message size mismatch with rank 0: expected " + std::to_string(expected) + " bytes";
  run_ranks(2, [&](int rank) {
    Connection* c = mesh.conns[rank][1 - rank];
    const std::string& text = rank == 0 ? sender_text : receiver_text;
    expect_error(
        [&] {
          drive(
              *mesh.transports[rank], {c}, [] { return false; }, milliseconds(3000));
        },
        cclInternalError, text, 1 - rank);
    // The connection stays failed: progress() and wait() repeat it.
    expect_error([&] { c->progress(); }, cclInternalError, text);
    expect_error([&] { mesh.transports[rank]->wait(milliseconds(10)); }, cclInternalError, text);
  });
  EXPECT_FALSE(send.complete);
  EXPECT_FALSE(recv.complete);
  EXPECT_EQ(sink.pieces, 0u);
}

TEST_F(IbTest, SenderLargerThanReceive) { expect_size_mismatch(100, 64); }
TEST_F(IbTest, SenderSmallerThanReceive) { expect_size_mismatch(10, 4096); }
TEST_F(IbTest, SomethingForAnEmptyReceive) { expect_size_mismatch(1, 0); }

TEST_F(IbTest, WaitIsBoundedAndInterruptible) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("wait"));
  Transport& t = *mesh.transports[0];
  auto start = Clock::now();
  t.wait(milliseconds(30));
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  TestSink sink(SinkKind::Copy, 10);
  RecvRequest recv{10, &sink};
  mesh.conns[0][1]->post_recv(&recv);
  mesh.conns[0][1]->progress();
  std::thread waker([&] {
    std::this_thread::sleep_for(milliseconds(100));
    t.interrupt();
  });
  start = Clock::now();
  t.wait(std::chrono::seconds(20));
  waker.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  // An interrupt before the wait is not lost; "forever" is a valid timeout.
  t.interrupt();
  start = Clock::now();
  t.wait(std::chrono::microseconds::max());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  EXPECT_FALSE(recv.complete);
}

TEST_F(IbTest, AbortFlagReleasesAWait) {
  InMemoryStore store;
  AbortFlag abort{false};
  Mesh mesh = Mesh::make(2, store, unique_tag("abort"), &abort);
  abort = true;
  auto start = Clock::now();
  mesh.transports[0]->wait(std::chrono::seconds(20));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
}

}  // namespace
}  // namespace ccl::transport::ib_test
