// The mock provider behaves as the transport needs a real HCA to (mock_verbs.h), and the
// transport's QP transitions (ib_qp.h) are the legal ones: a step out of order is refused, by
// the mock and with a clear error from the transport.
#include <arpa/inet.h>

#include <functional>

#include "ib_test_util.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/ib_devices.h"
#include "transport/ib/ib_qp.h"

namespace ccl::transport::ib_test {
namespace {

using namespace ib;

// Two QPs of one PD, created in RESET, with the raw verbs table.
struct QpPair : IbTest {
  void SetUp() override {
    IbTest::SetUp();
    api = &mock_->api();
    int n = 0;
    ibv_device** list = api->get_device_list(&n);
    ASSERT_EQ(n, 1);
    context = api->open_device(list[0]);
    api->free_device_list(list);
    pd = api->alloc_pd(context);
    cq = api->create_cq(context, 64, nullptr, nullptr, 0);
    for (auto*& qp : qps) qp = create_rc_qp(*api, pd, cq, 16, 16);
    port.device = "mlx5_0";
    port.port = 1;
    port.lid = 7;
    port.active_mtu = IBV_MTU_4096;
  }
  void TearDown() override {
    for (ibv_mr* mr : mrs) api->dereg_mr(mr);
    for (auto* qp : qps) EXPECT_EQ(api->destroy_qp(qp), 0);
    EXPECT_EQ(api->destroy_cq(cq), 0);
    EXPECT_EQ(api->dealloc_pd(pd), 0);
    EXPECT_EQ(api->close_device(context), 0);
    IbTest::TearDown();
  }
  RemoteQp remote_of(int i) const {
    RemoteQp r;
    r.lid = 7;
    r.mtu = IBV_MTU_4096;
    r.qpn = qps[i]->qp_num;
    r.psn = 100 + i;
    return r;
  }
  void connect_both() {
    for (int i = 0; i < 2; ++i) {
      qp_to_init(*api, qps[i], port);
      qp_to_rtr(*api, qps[i], port, remote_of(1 - i));
      qp_to_rts(*api, qps[i], 100 + i, QpTimeouts{});
    }
  }
  ibv_mr* reg(void* p, size_t n, int access) {
    ibv_mr* mr = api->reg_mr(pd, p, n, access);
    mrs.push_back(mr);
    return mr;
  }
  int write(int from, const void* src, uint32_t lkey, size_t n, void* dst, uint32_t rkey,
            const uint32_t* imm = nullptr) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(src), static_cast<uint32_t>(n), lkey};
    ibv_send_wr wr{};
    wr.wr_id = 42;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    if (imm) wr.imm_data = htonl(*imm);
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst);
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return api->post_send(qps[from], &wr, &bad);
  }
  int post_recv(int on) {
    ibv_recv_wr wr{};
    wr.wr_id = 7;
    ibv_recv_wr* bad = nullptr;
    return api->post_recv(qps[on], &wr, &bad);
  }
  std::vector<ibv_wc> poll() {
    ibv_wc wc[16];
    int n = api->poll_cq(cq, 16, wc);
    return std::vector<ibv_wc>(wc, wc + std::max(n, 0));
  }

  const VerbsApi* api = nullptr;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qps[2] = {};
  IbPort port;
  std::vector<ibv_mr*> mrs;
};

TEST_F(QpPair, TheTransportsTransitionsReachRts) {
  connect_both();
  EXPECT_EQ(mock_->qp_state(qps[0]->qp_num), IBV_QPS_RTS);
  EXPECT_EQ(mock_->qp_state(qps[1]->qp_num), IBV_QPS_RTS);
}

TEST_F(QpPair, StepsOutOfOrderAreRefusedWithAClearError) {
  // RESET -> RTR skips INIT.
  expect_error([&] { qp_to_rtr(*api, qps[0], port, remote_of(1)); }, cclSystemError,
               "ib: moving QP " + std::to_string(qps[0]->qp_num) + " to RTR");
  qp_to_init(*api, qps[0], port);
  // INIT -> RTS skips RTR.
  expect_error([&] { qp_to_rts(*api, qps[0], 1, QpTimeouts{}); }, cclSystemError, "to RTS");
  qp_to_rtr(*api, qps[0], port, remote_of(1));
  // RTR -> INIT goes back.
  expect_error([&] { qp_to_init(*api, qps[0], port); }, cclSystemError, "to INIT");
  EXPECT_EQ(mock_->qp_state(qps[0]->qp_num), IBV_QPS_RTR);
}

TEST_F(QpPair, MissingOrExtraAttributesAreRefused) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  EXPECT_EQ(api->modify_qp(qps[0], &attr, IBV_QP_STATE | IBV_QP_PORT), EINVAL);  // no pkey, access
  EXPECT_EQ(api->modify_qp(qps[0], &attr,
                           IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS |
                               IBV_QP_PATH_MTU),
            EINVAL);  // path MTU belongs to RTR
  EXPECT_EQ(api->modify_qp(qps[0], &attr,
                           IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
            0);
  // A port that does not exist, an InfiniBand path without a LID.
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = IBV_MTU_4096;
  rtr.dest_qp_num = qps[1]->qp_num;
  rtr.ah_attr.port_num = 2;
  rtr.ah_attr.dlid = 7;
  const int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  EXPECT_EQ(api->modify_qp(qps[0], &rtr, rtr_mask), EINVAL);
  rtr.ah_attr.port_num = 1;
  rtr.ah_attr.dlid = 0;  // InfiniBand needs a LID
  EXPECT_EQ(api->modify_qp(qps[0], &rtr, rtr_mask), EINVAL);
  rtr.ah_attr.dlid = 7;
  EXPECT_EQ(api->modify_qp(qps[0], &rtr, rtr_mask), 0);
}

TEST_F(QpPair, PostingOutsideRtsIsRefused) {
  std::vector<char> buf(64);
  ibv_mr* mr = reg(buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(post_recv(0), EINVAL);  // RESET
  qp_to_init(*api, qps[0], port);
  EXPECT_EQ(write(0, buf.data(), mr->lkey, 8, buf.data(), mr->rkey), EINVAL);  // INIT
  qp_to_rtr(*api, qps[0], port, remote_of(1));
  EXPECT_EQ(write(0, buf.data(), mr->lkey, 8, buf.data(), mr->rkey), EINVAL);  // RTR
  EXPECT_EQ(post_recv(0), 0);
}

TEST_F(QpPair, WritesCheckKeysAndBounds) {
  std::vector<char> src(256, 'a'), dst(256, 'z');
  ibv_mr* s = reg(src.data(), src.size(), 0);
  ibv_mr* d = reg(dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  // Each error leaves the writer's QP in ERR: both QPs start over for each case.
  auto status_of = [&](const std::function<int()>& post) {
    for (auto* qp : qps) {
      ibv_qp_attr attr{};
      attr.qp_state = IBV_QPS_RESET;
      api->modify_qp(qp, &attr, IBV_QP_STATE);
    }
    connect_both();
    EXPECT_EQ(post(), 0);
    auto wc = poll();
    EXPECT_EQ(wc.size(), 1u);
    return wc.empty() ? -1 : static_cast<int>(wc[0].status);
  };
  EXPECT_EQ(status_of([&] { return write(0, src.data(), s->lkey, 100, dst.data(), d->rkey); }),
            IBV_WC_SUCCESS);
  EXPECT_EQ(dst[99], 'a');
  EXPECT_EQ(dst[100], 'z');
  // The lkey where the rkey belongs, a target past the end of its MR, an MR not remotely
  // writable, a source outside its MR.
  EXPECT_EQ(status_of([&] { return write(0, src.data(), s->lkey, 8, dst.data(), d->lkey); }),
            IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(mock_->qp_state(qps[0]->qp_num), IBV_QPS_ERR);
  EXPECT_EQ(status_of([&] { return write(0, src.data(), s->lkey, 8, dst.data() + 250, d->rkey); }),
            IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(status_of([&] { return write(0, dst.data(), d->lkey, 8, src.data(), s->rkey); }),
            IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(status_of([&] { return write(0, src.data() + 200, s->lkey, 64, dst.data(), d->rkey); }),
            IBV_WC_LOC_PROT_ERR);
  // A peer QP in error answers nothing: the writer retries until it gives up.
  EXPECT_EQ(status_of([&] {
              ibv_qp_attr attr{};
              attr.qp_state = IBV_QPS_ERR;
              api->modify_qp(qps[1], &attr, IBV_QP_STATE);
              return write(0, src.data(), s->lkey, 8, dst.data(), d->rkey);
            }),
            IBV_WC_RETRY_EXC_ERR);
}

TEST_F(QpPair, WriteWithImmediateWaitsForAReceive) {
  connect_both();
  std::vector<char> src(64, 'x'), dst(64, 0);
  ibv_mr* s = reg(src.data(), src.size(), 0);
  ibv_mr* d = reg(dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  const uint32_t imm = 0x1234;
  ASSERT_EQ(write(0, src.data(), s->lkey, 10, dst.data(), d->rkey, &imm), 0);
  EXPECT_TRUE(poll().empty());  // receiver not ready: retried (rnr_retry 7)
  EXPECT_EQ(dst[0], 0);
  ASSERT_EQ(post_recv(1), 0);
  auto wc = poll();
  ASSERT_EQ(wc.size(), 2u);
  bool saw_recv = false;
  for (const ibv_wc& w : wc) {
    EXPECT_EQ(w.status, IBV_WC_SUCCESS);
    if (w.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      saw_recv = true;
      EXPECT_EQ(ntohl(w.imm_data), imm);
      EXPECT_EQ(w.byte_len, 10u);
    }
  }
  EXPECT_TRUE(saw_recv);
  EXPECT_EQ(dst[9], 'x');
}

TEST_F(QpPair, AKilledPeerFailsWritesAndFlushesReceives) {
  connect_both();
  std::vector<char> buf(64);
  ibv_mr* mr = reg(buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(post_recv(0), 0);
  mock_->kill_qp(qps[1]->qp_num);
  ASSERT_EQ(write(0, buf.data(), mr->lkey, 8, buf.data() + 8, mr->rkey), 0);
  auto wc = poll();
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc[1].wr_id, 7u);
}

}  // namespace
}  // namespace ccl::transport::ib_test
