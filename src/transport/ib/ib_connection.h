// One peer's ib connection: receiver-driven RDMA writes (ib_wire.h has the memory layout).
//
// Receive: for each posted receive, in order, the receiver writes a CTS into the sender's FIFO
// naming where the bytes go: the sink's direct destination (registered through the request's
// region key or the registration cache) as one segment, else bounce slots of `chunk_bytes`, one
// segment each, whose bytes are handed to sink->consume() once the segment is complete (pieces
// start at multiples of the slot size, itself a multiple of kPieceAlign). At most kFifoSlots
// segments are announced and not yet arrived; a FIFO slot is rewritten only after the segment it
// held arrived, so the sender never loses an entry.
// Send: once the CTS of its next segment has arrived, the sender writes it, striped over the QPs
// in writes of at most `chunk_bytes`, the last write of each stripe with an immediate; the send
// is complete when its writes are (the source may then be reused). A CTS whose message size is
// not the send's fails both ends with "message size mismatch".
// Completions of error (a peer gone: IBV_WC_RETRY_EXC_ERR) fail the connection with RemoteError
// naming the peer; the peer's failure notice or goodbye arrives in the notice slot.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>

#include "base/deadline.h"
#include "base/error.h"
#include "transport/failure_notice.h"
#include "transport/ib/ib_link.h"
#include "transport/ib/ib_reg_cache.h"
#include "transport/transport.h"

namespace ccl::transport::ib {

struct IbConnectionOptions {
  size_t chunk_bytes = 1 << 20;  // largest write, and a bounce slot's size (kPieceAlign multiple)
  uint32_t bounce_slots = 4;
};

class IbConnection final : public Connection {
 public:
  IbConnection(int rank, int peer, IbDevice& device, IbRegCache& cache, int qps,
               const IbConnectionOptions& options);
  ~IbConnection() override;

  IbLink& link() { return link_; }

  void post_send(SendRequest* request) override;
  void post_recv(RecvRequest* request) override;
  bool progress() override;
  bool busy() const override { return !sends_.empty() || !recvs_.empty(); }

  // For Transport::wait(): processes the completions there are (never throws: a failure is
  // recorded, and progress() throws it); true if there were any.
  bool poll();
  // Something progress() can advance without a new completion (new posts, completions taken).
  bool ready() const { return ready_ && busy(); }
  bool failed() const { return failed_; }
  const Error& error() const { return error_; }
  const std::optional<FailureNotice>& peer_notice() const { return peer_notice_; }
  bool peer_departed() const { return peer_departed_; }
  // While busy (or with `idle_too`) with nothing completing for `quiet`, writes zero bytes to
  // the peer: if it is gone the write fails after the QP's retries, failing the connection.
  void probe_if_quiet(Clock::duration quiet, bool idle_too = false);

  // Failure propagation (transport.h): best effort, never blocks. Afterwards nothing more is
  // sent on this connection.
  void send_notice(const FailureNotice& notice);
  void send_goodbye();
  // True once the notice or goodbye posted has completed (or cannot).
  bool notice_settled();
  // Once this end has failed or sent its notice, the peer must not write into receive buffers
  // any more (its CTS entries name them): waits a little (bounded) for the notice or mismatch
  // message posted to complete, until `deadline`, then moves every QP to ERR. Idempotent.
  void shut_down(const Deadline& deadline);

 private:
  struct PendingSend {
    SendRequest* request;
    uint32_t lkey = 0;
    const IbRegCache::Entry* reg = nullptr;
    uint64_t claimed = 0;  // bytes covered by CTS entries taken
    bool claimed_all = false;
    int open_segments = 0;
  };
  struct OutSegment {
    uint64_t seq;
    PendingSend* send;
    uint64_t offset, length, raddr;
    uint32_t rkey;
    int stripes;
    int stripes_done = 0;
    uint64_t posted[kMaxQpsPerConnection] = {};  // bytes of each stripe posted
    bool stripe_posted[kMaxQpsPerConnection] = {};
  };
  struct PendingRecv {
    RecvRequest* request;
    std::byte* direct = nullptr;
    uint32_t rkey = 0;
    const IbRegCache::Entry* reg = nullptr;
    uint64_t issued = 0;  // bytes announced by CTS
    bool issued_all = false;
    int open_segments = 0;
  };
  struct InSegment {
    uint64_t seq;
    PendingRecv* recv;
    uint64_t offset, length;
    int slot;  // bounce slot, -1: direct
    int stripes;
    uint32_t arrived = 0;  // a bit per stripe
  };

  void handle(const ibv_wc& wc);
  void handle_immediate(int qp, uint32_t imm);
  void data_arrived(int qp, uint32_t seq);
  void stripe_written(uint32_t seq);
  bool issue_cts();
  bool claim_cts();
  bool post_data();
  // Posts what the send queue of `qp` takes of the segment's stripe on it.
  bool post_stripe(OutSegment& segment, int qp);
  bool deliver();
  bool complete_sends();
  bool ensure_bounce();
  void release(const IbRegCache::Entry*& reg);
  void write_notice(uint32_t state, const FailureNotice& notice);
  void send_mismatch(uint64_t seq);
  void throw_if_peer_gone();
  // The error a peer's notice or goodbye means for this end, if it sent one.
  std::optional<Error> peer_gone_error() const;
  // A notice, goodbye or mismatch message posted and not yet completed.
  bool control_outstanding() const {
    return (notice_posted_ && !notice_done_) || mismatch_outstanding_;
  }
  // QPs to ERR now (shut_down() without the wait).
  void quiesce();
  // Records the first failure; progress() and wait() throw it while requests are pending.
  void record(const Error& error);
  [[noreturn]] void fail(cclResult_t code, const std::string& message);

  const int rank_;
  IbDevice& device_;
  IbRegCache& cache_;
  IbLink link_;
  const IbConnectionOptions options_;

  std::deque<PendingSend> sends_;
  std::deque<OutSegment> out_segments_;  // claimed, not yet written
  uint64_t cts_arrived_ = 0;             // CTS entries whose arrival completed
  uint64_t cts_taken_ = 0;

  std::deque<PendingRecv> recvs_;
  std::deque<InSegment> in_segments_;  // announced, in order
  uint64_t next_cts_ = 0;
  std::byte* bounce_ = nullptr;
  ibv_mr* bounce_mr_ = nullptr;
  std::vector<bool> slot_busy_;

  bool ready_ = false;
  bool failed_ = false;
  Error error_{cclSuccess, ""};
  std::optional<FailureNotice> peer_notice_;
  bool peer_departed_ = false;
  bool notice_posted_ = false;  // ours (or our goodbye): nothing more is sent
  bool notice_done_ = false;
  bool probe_outstanding_ = false;
  bool mismatch_outstanding_ = false;
  bool quiesced_ = false;  // QPs in ERR: their flushes are no failure
  Clock::time_point last_completion_ = Clock::now();
};

}  // namespace ccl::transport::ib
