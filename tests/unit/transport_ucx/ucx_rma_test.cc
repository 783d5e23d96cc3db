// The RMA path: registered regions get a "ucx" key; a send from a registered buffer to a
// registered destination goes by ucp_put_nbx; every other combination still delivers (the
// receiver answers kGo, or the sender never asks); sizes are checked in the handshake.
#include <gtest/gtest.h>

#include "transport/ucx/ucx_chunking.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_endpoint_info.h"
#include "ucx_test_util.h"

namespace ccl::transport::ucx_test {
namespace {

class UcxRma : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { use_tls(GetParam()); }
};

// UCX emulates RMA over tcp, where the handshake is off by default (ucx_options.h): on here.
const ucx::UcxOptions kRmaOn{ucx::UcxOptions::Rma::kAlways};

TEST_P(UcxRma, RegisterAddsAPackedKey) {
  Mesh mesh(2, kRmaOn);
  ASSERT_TRUE(mesh.ok());
  RegisteredBuffer buffer(*mesh.transports[0], 3 * 4096 + 5, 1);
  const TransportKey* key = buffer.region()->key_of("ucx");
  ASSERT_NE(key, nullptr);
  EXPECT_GT(key->packed_bytes, 0);
  EXPECT_LE(key->packed_bytes, TransportKey::kMaxPacked);
  // The key survives serialization (it travels in regions exchanged between ranks).
  RegisteredRegion copy = deserialize_region(serialize(*buffer.region()));
  ASSERT_NE(copy.key_of("ucx"), nullptr);
  EXPECT_EQ(copy.key_of("ucx")->packed_bytes, key->packed_bytes);
}

struct Case {
  bool sender_registered;
  bool receiver_registered;
};

// Messages of several sizes from rank 0 to rank 1 (and back), registration as `c` says.
void run_case(Mesh& mesh, Case c, int from, int to, uint64_t id_base) {
  const std::vector<size_t> sizes = {ucx::kRmaMinBytes, (1 << 20) + 64, (6 << 20) + 3, 1000};
  size_t total = 0;
  for (size_t s : sizes) total += s;
  RegisteredBuffer src(*mesh.transports[from], total, id_base + 1);
  RegisteredBuffer dst(*mesh.transports[to], total, id_base + 2);
  std::vector<SendRequest> sends(sizes.size());
  std::vector<std::unique_ptr<TestSink>> sinks(sizes.size());
  std::vector<RecvRequest> recvs(sizes.size());
  size_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto message = make_message(static_cast<uint32_t>(50 + i), sizes[i]);
    std::memcpy(src.data() + offset, message.data(), sizes[i]);
    sends[i] =
        SendRequest{src.data() + offset, sizes[i], c.sender_registered ? src.region() : nullptr};
    sinks[i] = std::make_unique<TestSink>(SinkKind::Direct, sizes[i], dst.data() + offset);
    recvs[i] =
        RecvRequest{sizes[i], sinks[i].get(), c.receiver_registered ? dst.region() : nullptr};
    offset += sizes[i];
  }
  // The receives first for half of the messages, the sends first for the rest.
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i % 2 == 0) {
      mesh.conn(to, from)->post_recv(&recvs[i]);
      mesh.conn(from, to)->post_send(&sends[i]);
    } else {
      mesh.conn(from, to)->post_send(&sends[i]);
      mesh.conn(to, from)->post_recv(&recvs[i]);
    }
  }
  mesh.drive_all([&] {
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (!sends[i].complete || !recvs[i].complete) return false;
    }
    return true;
  });
  offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(first_mismatch(dst.data() + offset, sizes[i], static_cast<uint32_t>(50 + i)), -1)
        << sizes[i] << " bytes";
    EXPECT_EQ(sinks[i]->pieces, 0u);
    offset += sizes[i];
  }
}

TEST_P(UcxRma, BothRegisteredGoesByPut) {
  Mesh mesh(2, kRmaOn);
  ASSERT_TRUE(mesh.ok());
  run_case(mesh, {true, true}, 0, 1, 10);
  run_case(mesh, {true, true}, 1, 0, 20);
  // Three messages of each direction are at least kRmaMinBytes.
  EXPECT_EQ(stats_of(mesh.conn(0, 1)).rma_messages, 3u);
  EXPECT_EQ(stats_of(mesh.conn(1, 0)).offers_sent, 3u);
  EXPECT_EQ(stats_of(mesh.conn(1, 0)).rma_messages, 3u);
  EXPECT_EQ(stats_of(mesh.conn(0, 1)).go_sent, 0u);
}

TEST_P(UcxRma, RegisteredSenderToPlainReceiverIsToldToGo) {
  Mesh mesh(2, kRmaOn);
  ASSERT_TRUE(mesh.ok());
  run_case(mesh, {true, false}, 0, 1, 30);
  EXPECT_EQ(stats_of(mesh.conn(0, 1)).rma_messages, 0u);
  EXPECT_EQ(stats_of(mesh.conn(1, 0)).go_sent, 3u);
}

TEST_P(UcxRma, PlainSenderToRegisteredReceiverSendsChunks) {
  Mesh mesh(2, kRmaOn);
  ASSERT_TRUE(mesh.ok());
  run_case(mesh, {false, true}, 0, 1, 40);
  EXPECT_EQ(stats_of(mesh.conn(0, 1)).rma_messages, 0u);
  EXPECT_EQ(stats_of(mesh.conn(1, 0)).offers_sent, 0u);
  EXPECT_EQ(stats_of(mesh.conn(0, 1)).tagged_messages, 4u);
}

// The same regions message after message: the remote key is unpacked once.
TEST_P(UcxRma, RemoteKeyUnpackedOnce) {
  Mesh mesh(2, kRmaOn);
  ASSERT_TRUE(mesh.ok());
  const size_t bytes = 256 * 1024;
  RegisteredBuffer src(*mesh.transports[0], bytes, 1), dst(*mesh.transports[1], bytes, 2);
  for (int round = 0; round < 5; ++round) {
    auto message = make_message(static_cast<uint32_t>(round), bytes);
    std::memcpy(src.data(), message.data(), bytes);
    SendRequest send{src.data(), bytes, src.region()};
    TestSink sink(SinkKind::Direct, bytes, dst.data());
    RecvRequest recv{bytes, &sink, dst.region()};
    mesh.conn(0, 1)->post_send(&send);
    mesh.conn(1, 0)->post_recv(&recv);
    mesh.drive_all([&] { return send.complete && recv.complete; });
    EXPECT_EQ(first_mismatch(dst.data(), bytes, static_cast<uint32_t>(round)), -1);
  }
  EXPECT_EQ(stats_of(mesh.conn(0, 1)).rma_messages, 5u);
}

// A registered sender whose receiver expects another size: the receiver sees the kReadyToSend
// and fails with a size mismatch (even across the RMA threshold, where it sent no offer).
TEST_P(UcxRma, SizeMismatchSeenInTheHandshake) {
  for (size_t expected : {ucx::kRmaMinBytes + 64, size_t{1000}}) {
    Mesh mesh(2, kRmaOn);
    ASSERT_TRUE(mesh.ok());
    const size_t bytes = ucx::kRmaMinBytes * 2;
    RegisteredBuffer src(*mesh.transports[0], bytes, 1), dst(*mesh.transports[1], bytes, 2);
    SendRequest send{src.data(), bytes, src.region()};
    TestSink sink(SinkKind::Direct, expected, dst.data());
    RecvRequest recv{expected, &sink, dst.region()};
    mesh.conn(0, 1)->post_send(&send);
    mesh.conn(1, 0)->post_recv(&recv);
    try {
      mesh.drive_all([&] { return recv.complete; }, std::chrono::seconds(5));
      ADD_FAILURE() << "no mismatch for " << expected;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclInternalError) << e.what();
      EXPECT_NE(std::string(e.what()).find("message size mismatch"), std::string::npos) << e.what();
    }
  }
}

// A registered sender waiting for the receiver's answer, followed by a large unregistered
// message to the same peer: the later message's chunks must not fill the send window ahead of
// the first one's (the receiver posts chunk receives in message order), or both hang.
TEST_P(UcxRma, LaterMessageDoesNotOvertakeOneAwaitingItsAnswer) {
  // Chunks by rendezvous (else UCX may send them eagerly, completing them without the receiver).
  setenv("UCX_RNDV_THRESH", "16384", 1);
  Mesh mesh(2, kRmaOn);
  unsetenv("UCX_RNDV_THRESH");
  ASSERT_TRUE(mesh.ok());
  const size_t first = ucx::kRmaMinBytes * 4;
  const size_t second = (8 << 20) + 64;  // 33 chunks, over the send window
  RegisteredBuffer src(*mesh.transports[0], first, 1);
  auto message = make_message(71, first);
  std::memcpy(src.data(), message.data(), first);
  std::vector<std::byte> large = make_message(72, second);
  SendRequest send1{src.data(), first, src.region()};
  SendRequest send2{large.data(), second};
  mesh.conn(0, 1)->post_send(&send1);
  mesh.conn(0, 1)->post_send(&send2);
  // Unregistered, staged receives: the answer is kGo.
  TestSink sink1(SinkKind::Copy, first), sink2(SinkKind::AlignCheck, second);
  RecvRequest recv1{first, &sink1}, recv2{second, &sink2};
  mesh.conn(1, 0)->post_recv(&recv1);
  mesh.conn(1, 0)->post_recv(&recv2);
  mesh.drive_all(
      [&] { return send1.complete && send2.complete && recv1.complete && recv2.complete; },
      std::chrono::seconds(20));
  EXPECT_EQ(first_mismatch(sink1.data, 71), -1);
  EXPECT_EQ(first_mismatch(sink2.data, 72), -1);
  EXPECT_TRUE(sink2.errors.empty());
  EXPECT_EQ(stats_of(mesh.conn(1, 0)).go_sent, 1u);
}

// By default (kAuto) only an endpoint with a native RMA lane takes the handshake: none here.
TEST_P(UcxRma, EmulatedRmaIsNotUsedByDefault) {
  Mesh mesh(2);
  ASSERT_TRUE(mesh.ok());
  run_case(mesh, {true, true}, 0, 1, 50);
  EXPECT_EQ(stats_of(mesh.conn(0, 1)).rma_messages, 0u);
  EXPECT_EQ(stats_of(mesh.conn(1, 0)).offers_sent, 0u);
  EXPECT_EQ(stats_of(mesh.conn(0, 1)).tagged_messages, 4u);
}

TEST(UcxEndpointInfo, NativeRmaLanes) {
  // As UCX 1.13.1 prints an endpoint over tcp here, and one over an RDMA device.
  const char* tcp =
      "#                 lane[0]:  1:tcp/lo.0 md[0]                -> md[0]/tcp/sysdev[255] am "
      "am_bw#0 keepalive wireup\n"
      "#                  rma_bw: mds rndv_rkey_size 9\n";
  const char* rc =
      "#                 lane[0]:  2:rc_mlx5/mlx5_0:1.0 md[1]      -> md[1]/ib/sysdev[255] "
      "rma_bw#0 "
      "am am_bw#0 wireup{ud_mlx5/mlx5_0:1}\n";
  EXPECT_FALSE(ucx::has_rma_lane(tcp));
  EXPECT_TRUE(ucx::has_rma_lane(rc));
  EXPECT_FALSE(ucx::has_rma_lane(""));
}

TEST_P(UcxRma, DeregisterUnmaps) {
  InMemoryStore store;
  SetupContext ctx = make_context(0, 1, unique_tag("dereg"), &store);
  auto t = make_ucx_transport(ctx);
  {
    RegisteredBuffer a(*t, 10000, 1), b(*t, 100, 2);
    EXPECT_NE(a.region()->key_of("ucx"), nullptr);
  }
  // A region this transport never registered is ignored.
  RegisteredRegion stranger;
  stranger.id = 99;
  t->deregister_memory(stranger);
  // Registered twice: refused.
  RegisteredBuffer c(*t, 100, 3);
  RegisteredRegion again = *c.region();
  again.keys.clear();
  EXPECT_THROW(t->register_memory(again), Error);
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxRma, ::testing::Values(kTcpOnly, kDefaultTls),
                         [](const auto& info) { return tls_name(info.param); });

}  // namespace
}  // namespace ccl::transport::ucx_test
