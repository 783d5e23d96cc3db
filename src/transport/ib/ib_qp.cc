#include "transport/ib/ib_qp.h"

#include <algorithm>
#include <cerrno>

#include "base/config.h"
#include "base/error.h"

namespace ccl::transport::ib {
namespace {

// 0.64 ms: how long the peer waits before resending to a QP with no receive posted.
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint8_t kRnrRetryForever = 7;
constexpr uint8_t kHopLimit = 255;

void modify(const VerbsApi& api, ibv_qp* qp, ibv_qp_attr* attr, int mask, const char* step) {
  int rc = api.modify_qp(qp, attr, mask);
  if (rc != 0) throw_system_error(rc, "ib: moving QP %u to %s", qp->qp_num, step);
}

}  // namespace

QpTimeouts qp_timeouts_from_config() {
  QpTimeouts t;
  int64_t timeout = config_int("CCL_IB_TIMEOUT");
  int64_t retry = config_int("CCL_IB_RETRY_CNT");
  if (timeout < 0 || timeout > 31) {
    throw_error(cclInvalidUsage, "CCL_IB_TIMEOUT=%lld: expected 0..31",
                static_cast<long long>(timeout));
  }
  if (retry < 0 || retry > 7) {
    throw_error(cclInvalidUsage, "CCL_IB_RETRY_CNT=%lld: expected 0..7",
                static_cast<long long>(retry));
  }
  t.timeout = static_cast<int>(timeout);
  t.retry_cnt = static_cast<int>(retry);
  return t;
}

ibv_qp* create_rc_qp(const VerbsApi& api, ibv_pd* pd, ibv_cq* cq, uint32_t send_depth,
                     uint32_t recv_depth) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = send_depth;
  init.cap.max_recv_wr = recv_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.sq_sig_all = 0;
  ibv_qp* qp = api.create_qp(pd, &init);
  if (qp == nullptr) throw_system_error(errno, "ib: create_qp");
  return qp;
}

void qp_to_init(const VerbsApi& api, ibv_qp* qp, const IbPort& port) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(port.port);
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  modify(api, qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
         "INIT");
}

void qp_to_rtr(const VerbsApi& api, ibv_qp* qp, const IbPort& port, const RemoteQp& remote) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(port.active_mtu, remote.mtu);
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.port_num = static_cast<uint8_t>(port.port);
  attr.ah_attr.sl = 0;
  if (port.ethernet) {
    // RoCE: every packet carries a GRH; the GID chosen at scan is our source address.
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = remote.gid;
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid.index);
    attr.ah_attr.grh.hop_limit = kHopLimit;
    attr.ah_attr.grh.traffic_class = 0;
  } else {
    attr.ah_attr.is_global = 0;
    attr.ah_attr.dlid = remote.lid;
  }
  modify(api, qp, &attr,
         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
         "RTR");
}

void qp_to_rts(const VerbsApi& api, ibv_qp* qp, uint32_t psn, const QpTimeouts& timeouts) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn;
  attr.timeout = static_cast<uint8_t>(timeouts.timeout);
  attr.retry_cnt = static_cast<uint8_t>(timeouts.retry_cnt);
  attr.rnr_retry = kRnrRetryForever;
  attr.max_rd_atomic = 1;
  modify(api, qp, &attr,
         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
             IBV_QP_MAX_QP_RD_ATOMIC,
         "RTS");
}

}  // namespace ccl::transport::ib
