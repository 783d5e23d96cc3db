// The verbs resources of one peer connection and the few operations the protocol needs of them:
// a CQ (on the transport's completion channel), CCL_IB_QPS_PER_CONNECTION RC QPs sharing it, and
// the registered ControlBlock the peer writes CTS entries and notices into (ib_wire.h).
//
// Work request ids say what completed: the QP, the kind, a tag (a segment number) and the WR's
// index on its QP. Writes are signaled only where the caller asks; one signaled completion
// retires every WR posted before it on its QP, which is how the send queue's space is counted.
// Every QP keeps `recv_depth` receives posted (with no buffer: they only take immediates),
// reposted as they complete.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/ib/ib_device.h"
#include "transport/ib/ib_qp.h"
#include "transport/ib/ib_wire.h"

namespace ccl::transport::ib {

enum class WrKind : uint8_t { kRecv, kDataLast, kDataMid, kCts, kNotice, kProbe, kMismatch };

struct WrId {
  int qp = 0;
  WrKind kind = WrKind::kRecv;
  uint32_t tag = 0;    // 24 bits: a segment number
  uint32_t index = 0;  // of the WR on its QP's send queue
};
uint64_t encode_wr_id(const WrId& id);
WrId decode_wr_id(uint64_t wr_id);

class IbLink {
 public:
  // Creates the CQ and `qps` QPs (in INIT) and registers the control block. Throws SystemError.
  // Where the device's max_cqe cannot hold every QP's send and receive depth, the depths are
  // lowered to fit (a full CQ would overflow and break the connection).
  IbLink(IbDevice& device, int qps, uint32_t send_depth, uint32_t recv_depth);
  ~IbLink();
  IbLink(const IbLink&) = delete;
  IbLink& operator=(const IbLink&) = delete;

  // What the peer needs to connect to this end (random first PSNs).
  EndpointInfo local_info(int rank, int peer) const;
  // RTR then RTS towards `remote`, then the receives are posted. Throws SystemError.
  void connect(const EndpointInfo& remote, const QpTimeouts& timeouts);
  bool connected() const { return connected_; }
  // Every QP to ERR: the peer's later writes are refused (they fail at the peer) and what is
  // posted here flushes. Idempotent; never throws (a refusal is logged).
  void to_error();
  bool errored() const { return errored_; }

  int qps() const { return static_cast<int>(qps_.size()); }
  ibv_cq* cq() const { return cq_; }
  ControlBlock& control() { return *control_; }
  uint64_t remote_fifo_addr(uint32_t slot) const;
  uint64_t remote_notice_addr() const;
  uint32_t remote_rkey() const { return remote_rkey_; }
  uint32_t control_lkey() const { return control_mr_->lkey; }
  uint32_t control_rkey() const { return control_mr_->rkey; }

  // Send queue slots free on `qp` (posted minus retired). The last slot of QP 0 is kept for
  // notices, mismatch messages and probes: the flow (CTS entries, data) uses QP 0 only while
  // send_space(0) > 1.
  uint32_t send_space(int qp) const;
  // RDMA write of [local, local + len) (lkey) to raddr (rkey), with an immediate when `imm` has
  // a value. Returns the provider's error (0: posted).
  int post_write(int qp, const void* local, uint32_t lkey, uint64_t len, uint64_t raddr,
                 uint32_t rkey, const uint32_t* imm, bool signaled, WrKind kind, uint32_t tag);
  // WR index the next post on `qp` gets (for signaling every n-th).
  uint32_t next_index(int qp) const { return posted_[qp]; }

  // Polls up to `n` completions; retires send slots and reposts receives as they complete.
  // Returns the count, or throws InternalError when the provider reports a broken CQ.
  int poll(ibv_wc* wc, int n);
  // Requests an event on the completion channel for the next completion.
  void arm();

 private:
  void release();
  void post_receives(int qp, uint32_t count);

  const VerbsApi& api_;
  IbDevice& device_;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  std::vector<uint32_t> psn_;
  std::vector<uint32_t> posted_;   // WRs posted on each send queue
  std::vector<uint32_t> retired_;  // of them, retired by a signaled completion
  uint32_t send_depth_;
  uint32_t recv_depth_;
  struct FreeControl {
    void operator()(ControlBlock* p) const;
  };
  std::unique_ptr<ControlBlock, FreeControl> control_;
  ibv_mr* control_mr_ = nullptr;
  uint64_t remote_control_ = 0;
  uint32_t remote_rkey_ = 0;
  bool connected_ = false;
  bool errored_ = false;
};

}  // namespace ccl::transport::ib
