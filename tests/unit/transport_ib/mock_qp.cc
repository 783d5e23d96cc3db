// The mock's queue pairs (mock_verbs.h): creation, the RC state machine of the verbs spec, and
// posting work.
#include <cerrno>
#include <cstring>

#include "mock_fabric.h"

namespace ccl::transport::ib::mock {
namespace {

using Lock = std::lock_guard<std::mutex>;

struct Transition {
  ibv_qp_state from, to;
  int required, optional;
};

// RC transitions and their attributes (verbs spec, "modify QP"); to RESET and to ERR are always
// allowed with the state alone.
constexpr int kS = IBV_QP_STATE;
const Transition kTransitions[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT, kS | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, kS, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {IBV_QPS_INIT, IBV_QPS_RTR,
     kS | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
     IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH},
    {IBV_QPS_RTR, IBV_QPS_RTS,
     kS | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
         IBV_QP_MAX_QP_RD_ATOMIC,
     IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
         IBV_QP_CUR_STATE},
    {IBV_QPS_RTS, IBV_QPS_RTS, kS,
     IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
         IBV_QP_CUR_STATE},
};

MQp* qp_of(ibv_qp* qp) {
  auto it = fabric().qps.find(qp->qp_num);
  return it == fabric().qps.end() || &it->second->qp != qp ? nullptr : it->second.get();
}

// The values a transition's attributes must have; EINVAL otherwise.
int check_values(const Fabric& f, MQp* qp, const ibv_qp_attr* attr, int mask) {
  const auto& ports = qp->owner->device->config.ports;
  if (mask & IBV_QP_PORT) {
    if (attr->port_num < 1 || attr->port_num > ports.size()) return EINVAL;
  }
  if (mask & IBV_QP_PKEY_INDEX && attr->pkey_index != 0) return EINVAL;
  if (mask & IBV_QP_AV) {
    const int port = attr->ah_attr.port_num != 0 ? attr->ah_attr.port_num : qp->port;
    if (port < 1 || port > static_cast<int>(ports.size())) return EINVAL;
    const MockPort& p = ports[port - 1];
    if (p.state != IBV_PORT_ACTIVE) return EINVAL;
    if (p.ethernet) {
      // RoCE: every packet has a GRH, from one of the port's GIDs.
      if (!attr->ah_attr.is_global) return EINVAL;
      if (attr->ah_attr.grh.sgid_index >= p.gids.size()) return EINVAL;
    } else if (!attr->ah_attr.is_global && attr->ah_attr.dlid == 0) {
      return EINVAL;
    }
    if ((mask & IBV_QP_PATH_MTU) && attr->path_mtu > p.mtu) return EINVAL;
  }
  if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7) return EINVAL;
  (void)f;
  return 0;
}

void apply(MQp* qp, const ibv_qp_attr* attr, int mask) {
  if (mask & IBV_QP_PORT) qp->port = attr->port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) qp->access = attr->qp_access_flags;
  if (mask & IBV_QP_AV) qp->ah = attr->ah_attr;
  if (mask & IBV_QP_PATH_MTU) qp->path_mtu = attr->path_mtu;
  if (mask & IBV_QP_DEST_QPN) qp->dest_qpn = attr->dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) qp->rq_psn = attr->rq_psn;
  if (mask & IBV_QP_SQ_PSN) qp->sq_psn = attr->sq_psn;
  if (mask & IBV_QP_RNR_RETRY) qp->rnr_retry = attr->rnr_retry;
}

}  // namespace

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  auto pit = f.pds.find(pd);
  auto sit = f.cqs.find(attr->send_cq);
  auto rit = f.cqs.find(attr->recv_cq);
  if (pit == f.pds.end() || sit == f.cqs.end() || rit == f.cqs.end() ||
      attr->qp_type != IBV_QPT_RC || attr->srq != nullptr ||
      attr->cap.max_send_wr > static_cast<uint32_t>(pit->second->owner->device->config.max_qp_wr) ||
      attr->cap.max_recv_wr > static_cast<uint32_t>(pit->second->owner->device->config.max_qp_wr) ||
      attr->cap.max_send_sge > 4 || attr->cap.max_recv_sge > 4) {
    errno = EINVAL;
    return nullptr;
  }
  auto qp = std::make_unique<MQp>();
  qp->owner = pit->second->owner;
  qp->pd = pit->second.get();
  qp->send_cq = sit->second.get();
  qp->recv_cq = rit->second.get();
  qp->cap = attr->cap;
  qp->sig_all = attr->sq_sig_all != 0;
  qp->qp.context = pd->context;
  qp->qp.pd = pd;
  qp->qp.send_cq = attr->send_cq;
  qp->qp.recv_cq = attr->recv_cq;
  qp->qp.qp_context = attr->qp_context;
  qp->qp.qp_type = IBV_QPT_RC;
  qp->qp.state = IBV_QPS_RESET;
  qp->qp.qp_num = f.next_qpn++;
  ibv_qp* handle = &qp->qp;
  f.qps.emplace(handle->qp_num, std::move(qp));
  return handle;
}

int modify_qp(ibv_qp* handle, ibv_qp_attr* attr, int mask) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  MQp* qp = qp_of(handle);
  if (qp == nullptr || !(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state to = attr->qp_state;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) {
    if (mask != IBV_QP_STATE) return EINVAL;
    if (to == IBV_QPS_ERR) {
      f.to_error(qp);
    } else {
      qp->state = IBV_QPS_RESET;
      qp->recvs.clear();
      qp->stalled.clear();
    }
    handle->state = qp->state;
    return 0;
  }
  const Transition* t = nullptr;
  for (const Transition& candidate : kTransitions) {
    if (candidate.from == qp->state && candidate.to == to) t = &candidate;
  }
  if (t == nullptr) return EINVAL;
  if ((mask & t->required) != t->required || (mask & ~(t->required | t->optional)) != 0)
    return EINVAL;
  if (int rc = check_values(f, qp, attr, mask)) return rc;
  apply(qp, attr, mask);
  qp->state = to;
  handle->state = to;
  return 0;
}

int destroy_qp(ibv_qp* handle) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  MQp* qp = qp_of(handle);
  if (qp == nullptr) return EINVAL;
  const uint32_t qpn = handle->qp_num;
  qp->dead = true;
  f.to_error(qp);
  f.retry_stalled(qpn);  // writers stalled on it fail now
  f.qps.erase(qpn);
  return 0;
}

int post_send(ibv_qp* handle, ibv_send_wr* wr, ibv_send_wr** bad) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  MQp* qp = qp_of(handle);
  if (qp == nullptr) return EINVAL;
  for (; wr != nullptr; wr = wr->next) {
    *bad = wr;
    if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) return EINVAL;
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) return EINVAL;
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp->cap.max_send_sge) return EINVAL;
    if (qp->sq_posted - qp->sq_retired >= static_cast<int64_t>(qp->cap.max_send_wr)) return ENOMEM;
    MSendWr w;
    w.wr = *wr;
    w.wr.next = nullptr;
    w.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
    w.wr.sg_list = nullptr;
    w.sq_index = qp->sq_posted++;
    if (qp->state == IBV_QPS_ERR) {
      f.fail_send(qp, w, IBV_WC_WR_FLUSH_ERR);
    } else if (!qp->stalled.empty() || !f.execute(qp, w)) {
      qp->stalled.push_back(w);  // RC keeps order: behind a stalled write, everything waits
    }
  }
  *bad = nullptr;
  return 0;
}

int post_recv(ibv_qp* handle, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Fabric& f = fabric();
  Lock lock(f.mutex);
  MQp* qp = qp_of(handle);
  if (qp == nullptr) return EINVAL;
  for (; wr != nullptr; wr = wr->next) {
    *bad = wr;
    if (qp->state == IBV_QPS_RESET) return EINVAL;
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > qp->cap.max_recv_sge) return EINVAL;
    if (qp->recvs.size() >= qp->cap.max_recv_wr) return ENOMEM;
    if (qp->state == IBV_QPS_ERR) {
      ibv_wc wc{};
      wc.wr_id = wr->wr_id;
      wc.status = IBV_WC_WR_FLUSH_ERR;
      wc.qp_num = handle->qp_num;
      f.complete(qp->recv_cq, wc);
      continue;
    }
    qp->recvs.push_back(wr->wr_id);
  }
  *bad = nullptr;
  f.retry_stalled(handle->qp_num);
  return 0;
}

}  // namespace ccl::transport::ib::mock
