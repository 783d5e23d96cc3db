// Messages over the ib transport on the mock: many sizes in both directions with several
// outstanding, direct and bounce destinations, striping over several QPs, three ranks.
#include "ib_test_util.h"

namespace ccl::transport::ib_test {
namespace {

const size_t kSizes[] = {0, 1, 63, 64, 4096, 16383, 65 * 1024 + 3, 1 << 20, (3 << 20) + 17};

// Every rank sends every size to every other rank, all posted at once, and receives them
// through sinks of `kind`; bytes are checked, and for Direct no consume() is called.
void exchange(Mesh& mesh, SinkKind kind, uint32_t salt) {
  const int n = static_cast<int>(mesh.transports.size());
  run_ranks(n, [&](int rank) {
    std::vector<std::vector<std::byte>> out;
    std::vector<std::unique_ptr<SendRequest>> sends;
    std::vector<std::unique_ptr<TestSink>> sinks;
    std::vector<std::unique_ptr<RecvRequest>> recvs;
    std::vector<Connection*> conns;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      Connection* c = mesh.conns[rank][peer];
      conns.push_back(c);
      for (size_t i = 0; i < std::size(kSizes); ++i) {
        out.push_back(make_message(salt + rank * 100 + peer * 10 + i, kSizes[i]));
        sends.push_back(std::make_unique<SendRequest>(SendRequest{out.back().data(), kSizes[i]}));
        c->post_send(sends.back().get());
        sinks.push_back(std::make_unique<TestSink>(kind, kSizes[i]));
        recvs.push_back(std::make_unique<RecvRequest>(RecvRequest{kSizes[i], sinks.back().get()}));
        c->post_recv(recvs.back().get());
      }
    }
    drive(*mesh.transports[rank], conns, [&] {
      for (auto& s : sends) {
        if (!s->complete) return false;
      }
      for (auto& r : recvs) {
        if (!r->complete) return false;
      }
      return true;
    });
    size_t k = 0;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      for (size_t i = 0; i < std::size(kSizes); ++i, ++k) {
        const uint32_t seed = salt + peer * 100 + rank * 10 + i;
        EXPECT_EQ(first_mismatch(sinks[k]->data, seed), -1)
            << "rank " << rank << " from " << peer << " size " << kSizes[i];
        EXPECT_TRUE(sinks[k]->errors.empty()) << sinks[k]->errors.front();
        EXPECT_EQ(recvs[k]->done_bytes, kSizes[i]);
        if (kind == SinkKind::Direct) {
          EXPECT_EQ(sinks[k]->pieces, 0u);
        }
      }
    }
    for (Connection* c : conns) EXPECT_FALSE(c->busy());
  });
}

TEST_F(IbTest, AllSizesBothDirectionsDirect) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("direct"));
  exchange(mesh, SinkKind::Direct, 1);
}

TEST_F(IbTest, AllSizesBothDirectionsThroughBounceBuffers) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("bounce"));
  exchange(mesh, SinkKind::AlignCheck, 2);
  exchange(mesh, SinkKind::Copy, 3);
}

TEST_F(IbTest, SmallChunksManySegments) {
  // 64 KiB of buffering: 16 KiB writes and bounce slots, so a 3 MiB message is ~200 segments
  // through four slots (and the FIFO wraps many times).
  setenv("CCL_BUFFSIZE", "64K", 1);
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("chunks"));
  exchange(mesh, SinkKind::AlignCheck, 4);
  exchange(mesh, SinkKind::Direct, 5);
  EXPECT_LE(mock_->stats().largest_write, 16u * 1024);
}

TEST_F(IbTest, ThreeQpsCarryTheStripes) {
  setenv("CCL_IB_QPS_PER_CONNECTION", "3", 1);
  setenv("CCL_BUFFSIZE", "256K", 1);
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("qps"));
  exchange(mesh, SinkKind::Direct, 6);
  exchange(mesh, SinkKind::AlignCheck, 7);
  // Every QP of rank 0 wrote data.
  const auto stats = mock_->stats();
  const auto qps = mock_->qps_of(0);
  ASSERT_EQ(qps.size(), 3u);
  for (uint32_t qp : qps) {
    auto it = stats.bytes_by_qp.find(qp);
    ASSERT_NE(it, stats.bytes_by_qp.end());
    EXPECT_GT(it->second, 1u << 20) << "QP " << qp;
  }
}

TEST_F(IbTest, ThreeRanks) {
  InMemoryStore store;
  Mesh mesh = Mesh::make(3, store, unique_tag("three"));
  exchange(mesh, SinkKind::Direct, 8);
  exchange(mesh, SinkKind::AlignCheck, 9);
}

TEST_F(IbTest, RoceV2Connection) {
  mock_.reset();
  mock_ = std::make_unique<MockVerbs>();
  MockPort roce;
  roce.ethernet = true;
  roce.mtu = IBV_MTU_1024;
  roce.gids = {ib::mock::MockGid{ib::mock::gid_of("fe80::2"), "RoCE v2"},
               ib::mock::MockGid{ib::mock::gid_of("::ffff:10.1.0.2"), "RoCE v2"}};
  mock_->add_device(MockDevice{"rxe0", {roce}});
  use_fake_sysfs();
  EXPECT_EQ(ib_availability().detail, "rxe0:1 RoCE v2 GID 1 ::ffff:10.1.0.2");
  InMemoryStore store;
  Mesh mesh = Mesh::make(2, store, unique_tag("roce"));
  exchange(mesh, SinkKind::Direct, 10);
}

TEST_F(IbTest, MismatchedQpCountsFailSetup) {
  InMemoryStore store;
  const std::string tag = unique_tag("qpcount");
  std::vector<std::string> errors(2);
  std::vector<std::unique_ptr<Transport>> t(2);
  // The variable is read when a transport is made: make them one after the other.
  setenv("CCL_IB_QPS_PER_CONNECTION", "2", 1);
  MockVerbs::set_thread_process(0);
  t[0] = make_ib_transport(make_context(0, 2, tag, &store));
  setenv("CCL_IB_QPS_PER_CONNECTION", "1", 1);
  t[1] = make_ib_transport(make_context(1, 2, tag, &store));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      int peer = 1 - r;
      try {
        t[r]->connect(make_context(r, 2, tag, &store, std::chrono::milliseconds(2000)),
                      std::span<const int>(&peer, 1));
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const std::string& e : errors)
    EXPECT_NE(e.find("CCL_IB_QPS_PER_CONNECTION must be equal"), std::string::npos) << e;
}

}  // namespace
}  // namespace ccl::transport::ib_test
