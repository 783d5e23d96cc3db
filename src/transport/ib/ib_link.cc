#include "transport/ib/ib_link.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

#include "base/error.h"
#include "base/log.h"

namespace ccl::transport::ib {

uint64_t encode_wr_id(const WrId& id) {
  return (static_cast<uint64_t>(id.qp) << 60) | (static_cast<uint64_t>(id.kind) << 56) |
         (static_cast<uint64_t>(id.tag & 0xffffff) << 32) | id.index;
}

WrId decode_wr_id(uint64_t wr_id) {
  WrId id;
  id.qp = static_cast<int>(wr_id >> 60);
  id.kind = static_cast<WrKind>((wr_id >> 56) & 0xf);
  id.tag = static_cast<uint32_t>((wr_id >> 32) & 0xffffff);
  id.index = static_cast<uint32_t>(wr_id);
  return id;
}

void IbLink::FreeControl::operator()(ControlBlock* p) const {
  p->~ControlBlock();
  std::free(p);
}

IbLink::IbLink(IbDevice& device, int qps, uint32_t send_depth, uint32_t recv_depth)
    : api_(device.api()), device_(device), send_depth_(send_depth), recv_depth_(recv_depth) {
  try {
    // Every signaled send and every receive of every QP may sit in the CQ at once.
    const int max_cqe = std::max(device.attr().max_cqe, 1);
    const int64_t per_qp = (static_cast<int64_t>(max_cqe) - 16) / std::max(qps, 1);
    if (static_cast<int64_t>(send_depth_) + recv_depth_ > per_qp) {
      const uint32_t budget = static_cast<uint32_t>(std::max<int64_t>(per_qp, 3));
      recv_depth_ = std::max<uint32_t>(1, std::min(recv_depth_, budget / 2));
      send_depth_ = std::max<uint32_t>(2, std::min(send_depth_, budget - recv_depth_));
      CCL_WARN(kNet, "ib: max_cqe %d holds %d QPs of %u sends and %u receives only", max_cqe, qps,
               send_depth_, recv_depth_);
    }
    const int cqe = std::min<int>(qps * static_cast<int>(send_depth_ + recv_depth_) + 16, max_cqe);
    cq_ = api_.create_cq(device.context(), cqe, nullptr, device.channel(), 0);
    if (cq_ == nullptr) throw_system_error(errno, "ib: create_cq(%d)", cqe);
    std::random_device random;
    for (int i = 0; i < qps; ++i) {
      qps_.push_back(create_rc_qp(api_, device.pd(), cq_, send_depth_, recv_depth_));
      qp_to_init(api_, qps_.back(), device.port());
      psn_.push_back(random() & 0xffffff);
      posted_.push_back(0);
      retired_.push_back(0);
    }
    // Page aligned: an MR pins whole pages, and this one is written by the peer.
    void* p = nullptr;
    const size_t bytes = (sizeof(ControlBlock) + 4095) / 4096 * 4096;
    if (posix_memalign(&p, 4096, bytes) != 0) throw_error(cclSystemError, "ib: out of memory");
    std::memset(p, 0, bytes);
    control_.reset(new (p) ControlBlock());
    control_mr_ = api_.reg_mr(device.pd(), control_.get(), sizeof(ControlBlock),
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (control_mr_ == nullptr) throw_system_error(errno, "ib: registering the control block");
  } catch (...) {
    release();
    throw;
  }
}

IbLink::~IbLink() { release(); }

void IbLink::release() {
  for (ibv_qp* qp : qps_) api_.destroy_qp(qp);
  qps_.clear();
  if (control_mr_ != nullptr) api_.dereg_mr(control_mr_);
  control_mr_ = nullptr;
  if (cq_ != nullptr) {
    int rc = api_.destroy_cq(cq_);
    if (rc != 0) CCL_WARN(kNet, "ib: destroy_cq failed: %s", std::strerror(rc));
  }
  cq_ = nullptr;
}

EndpointInfo IbLink::local_info(int rank, int peer) const {
  const IbPort& port = device_.port();
  EndpointInfo info;
  info.rank = rank;
  info.peer = peer;
  info.ethernet = port.ethernet ? 1 : 0;
  info.mtu = static_cast<uint8_t>(port.active_mtu);
  info.lid = port.lid;
  std::memcpy(info.gid, port.gid.gid.raw, sizeof(info.gid));
  info.control_addr = reinterpret_cast<uintptr_t>(control_.get());
  info.control_rkey = control_mr_->rkey;
  for (size_t i = 0; i < qps_.size(); ++i) {
    info.qpn.push_back(qps_[i]->qp_num);
    info.psn.push_back(psn_[i]);
  }
  return info;
}

void IbLink::connect(const EndpointInfo& remote, const QpTimeouts& timeouts) {
  for (size_t i = 0; i < qps_.size(); ++i) {
    RemoteQp r;
    r.ethernet = remote.ethernet != 0;
    r.lid = remote.lid;
    std::memcpy(r.gid.raw, remote.gid, sizeof(r.gid.raw));
    r.mtu = static_cast<ibv_mtu>(remote.mtu);
    r.qpn = remote.qpn[i];
    r.psn = remote.psn[i];
    qp_to_rtr(api_, qps_[i], device_.port(), r);
    qp_to_rts(api_, qps_[i], psn_[i], timeouts);
    post_receives(static_cast<int>(i), recv_depth_);
  }
  remote_control_ = remote.control_addr;
  remote_rkey_ = remote.control_rkey;
  connected_ = true;
}

void IbLink::to_error() {
  if (errored_) return;
  errored_ = true;
  for (ibv_qp* qp : qps_) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    int rc = api_.modify_qp(qp, &attr, IBV_QP_STATE);
    if (rc != 0) {
      CCL_WARN(kNet, "ib: moving QP %u to ERR failed: %s", qp->qp_num, std::strerror(rc));
    }
  }
}

uint64_t IbLink::remote_fifo_addr(uint32_t slot) const {
  return remote_control_ + offsetof(ControlBlock, fifo) + slot * sizeof(CtsEntry);
}

uint64_t IbLink::remote_notice_addr() const {
  return remote_control_ + offsetof(ControlBlock, notice_in);
}

uint32_t IbLink::send_space(int qp) const {
  const uint32_t in_flight = posted_[qp] - retired_[qp];
  return in_flight >= send_depth_ ? 0 : send_depth_ - in_flight;
}

void IbLink::post_receives(int qp, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = encode_wr_id(WrId{qp, WrKind::kRecv, 0, 0});
    wr.num_sge = 0;
    ibv_recv_wr* bad = nullptr;
    int rc = api_.post_recv(qps_[qp], &wr, &bad);
    if (rc != 0) throw_system_error(rc, "ib: post_recv on QP %u", qps_[qp]->qp_num);
  }
}

int IbLink::post_write(int qp, const void* local, uint32_t lkey, uint64_t len, uint64_t raddr,
                       uint32_t rkey, const uint32_t* imm, bool signaled, WrKind kind,
                       uint32_t tag) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(local);
  sge.length = static_cast<uint32_t>(len);
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = encode_wr_id(WrId{qp, kind, tag, posted_[qp]});
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = imm != nullptr ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (imm != nullptr) wr.imm_data = htonl(*imm);
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  int rc = api_.post_send(qps_[qp], &wr, &bad);
  if (rc == 0) ++posted_[qp];
  return rc;
}

int IbLink::poll(ibv_wc* wc, int n) {
  int got = api_.poll_cq(cq_, n, wc);
  if (got < 0) throw_error(cclInternalError, "ib: poll_cq failed (%d): the CQ overflowed?", got);
  for (int i = 0; i < got; ++i) {
    const WrId id = decode_wr_id(wc[i].wr_id);
    if (id.qp < 0 || id.qp >= qps()) continue;
    if (id.kind != WrKind::kRecv) {
      retired_[id.qp] = id.index + 1;
    } else if (wc[i].status == IBV_WC_SUCCESS) {
      post_receives(id.qp, 1);
    }
  }
  return got;
}

void IbLink::arm() {
  int rc = api_.req_notify_cq(cq_, 0);
  if (rc != 0) throw_system_error(rc, "ib: req_notify_cq");
}

}  // namespace ccl::transport::ib
