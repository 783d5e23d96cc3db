#include "transport/ib/ib_connection.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/log.h"
#include "transport/posted_request.h"
#include "transport/registered_region.h"

namespace ccl::transport::ib {
namespace {

constexpr int kPollBatch = 32;
constexpr int kMaxPollRounds = 8;  // per poll(): one busy CQ cannot hold the caller forever
// How long a failed connection lets its notice or mismatch message complete before its QPs go
// to ERR (on a live link a write completes in microseconds).
constexpr std::chrono::milliseconds kSettleWait(20);

const char* kind_name(WrKind kind) {
  switch (kind) {
    case WrKind::kRecv:
      return "a receive";
    case WrKind::kDataLast:
    case WrKind::kDataMid:
      return "a data write";
    case WrKind::kCts:
      return "a clear-to-send write";
    case WrKind::kNotice:
      return "a notice write";
    case WrKind::kMismatch:
      return "a size mismatch write";
    case WrKind::kProbe:
      return "a liveness probe";
  }
  return "a work request";
}

}  // namespace

IbConnection::IbConnection(int rank, int peer, IbDevice& device, IbRegCache& cache, int qps,
                           const IbConnectionOptions& options)
    : Connection(peer),
      rank_(rank),
      device_(device),
      cache_(cache),
      link_(device, qps, std::min(256, std::max(device.attr().max_qp_wr, 2)),
            std::min<uint32_t>(4 * kFifoSlots, std::max(device.attr().max_qp_wr, 1))),
      options_(options) {}

IbConnection::~IbConnection() {
  // No write of the peer may land in a buffer once its registration is released.
  link_.to_error();
  for (PendingSend& s : sends_) release(s.reg);
  for (PendingRecv& r : recvs_) release(r.reg);
  if (bounce_mr_ != nullptr) device_.api().dereg_mr(bounce_mr_);
  std::free(bounce_);
}

void IbConnection::release(const IbRegCache::Entry*& reg) {
  if (reg != nullptr) cache_.release(reg);
  reg = nullptr;
}

void IbConnection::post_send(SendRequest* request) {
  start_send("ib", request, peer());
  PendingSend pending{request};
  if (request->bytes > 0) {
    const TransportKey* key = request->region != nullptr ? request->region->key_of("ib") : nullptr;
    if (key != nullptr && request->region->covers(request->data, request->bytes)) {
      pending.lkey = key->lkey;
    } else {
      pending.reg = cache_.acquire(request->data, request->bytes, 0);
      pending.lkey = pending.reg->mr->lkey;
    }
  }
  sends_.push_back(pending);
  ready_ = true;
}

void IbConnection::post_recv(RecvRequest* request) {
  start_recv("ib", request, peer());
  PendingRecv pending{request};
  std::byte* direct = request->bytes > 0 ? request->sink->direct_destination() : nullptr;
  if (direct != nullptr) {
    const TransportKey* key = request->region != nullptr ? request->region->key_of("ib") : nullptr;
    if (key != nullptr && request->region->covers(direct, request->bytes)) {
      pending.direct = direct;
      pending.rkey = key->rkey;
    } else {
      try {
        pending.reg = cache_.acquire(direct, request->bytes, IbRegCache::kRemoteWrite);
        pending.direct = direct;
        pending.rkey = pending.reg->mr->rkey;
      } catch (const Error& e) {
        // Memory the HCA may not write (or cannot pin) still arrives, through the bounce slots.
        CCL_WARN(kNet, "%s; receiving through bounce buffers instead", e.what());
      }
    }
  }
  recvs_.push_back(pending);
  ready_ = true;
}

bool IbConnection::progress() {
  if (failed_) {
    shut_down(Deadline::after(kSettleWait));
    if (!busy()) return false;
    throw error_;
  }
  bool moved = poll();
  if (failed_) {
    shut_down(Deadline::after(kSettleWait));
    if (busy()) throw error_;
    return moved;
  }
  try {
    moved |= deliver();
    moved |= complete_sends();
    if (!notice_posted_) {
      moved |= claim_cts();
      moved |= post_data();
      moved |= issue_cts();
    }
  } catch (const Error& e) {
    if (!failed_) record(e);
    shut_down(Deadline::after(kSettleWait));
    throw;
  }
  ready_ = false;
  if (busy() && !moved) throw_if_peer_gone();
  return moved;
}

bool IbConnection::poll() {
  bool any = false;
  ibv_wc wc[kPollBatch];
  for (int round = 0; round < kMaxPollRounds; ++round) {
    int n = 0;
    try {
      n = link_.poll(wc, kPollBatch);
    } catch (const Error& e) {
      record(e);
      return any;
    }
    for (int i = 0; i < n; ++i) {
      // A notice or a probe gives progress() nothing to do; anything else may.
      const WrKind kind = decode_wr_id(wc[i].wr_id).kind;
      const bool notice = kind == WrKind::kRecv && wc[i].status == IBV_WC_SUCCESS &&
                          imm_kind(ntohl(wc[i].imm_data)) == ImmKind::kNotice;
      if (!notice && kind != WrKind::kProbe && kind != WrKind::kNotice) ready_ = true;
      handle(wc[i]);
    }
    if (n > 0) {
      any = true;
      last_completion_ = Clock::now();
    }
    if (n < kPollBatch) break;
  }
  return any;
}

void IbConnection::handle(const ibv_wc& wc) {
  const WrId id = decode_wr_id(wc.wr_id);
  if (id.kind == WrKind::kNotice) notice_done_ = true;
  if (id.kind == WrKind::kMismatch) mismatch_outstanding_ = false;
  if (id.kind == WrKind::kProbe) probe_outstanding_ = false;
  // The notice or mismatch message a failed end waited for is out: nothing more may land here.
  if ((failed_ || notice_posted_) && !quiesced_ && !control_outstanding() &&
      (id.kind == WrKind::kNotice || id.kind == WrKind::kMismatch)) {
    quiesce();
  }
  if (wc.status != IBV_WC_SUCCESS) {
    if (failed_) return;  // the flushes that follow the first error
    if (quiesced_ && wc.status == IBV_WC_WR_FLUSH_ERR) return;  // our own shut_down()
    if (std::optional<Error> gone = peer_gone_error()) {
      // The peer said it failed or left (and may have shut its QPs): that is the error.
      record(*gone);
      return;
    }
    char detail[96];
    std::snprintf(detail, sizeof(detail), " (%s on QP %u, vendor error %#x)", kind_name(id.kind),
                  wc.qp_num, wc.vendor_err);
    record(Error(cclRemoteError,
                 "ib: rank " + std::to_string(rank_) + ": the connection to rank " +
                     std::to_string(peer()) + " failed: " + wc_status_text(wc.status) + detail,
                 peer()));
    return;
  }
  switch (id.kind) {
    case WrKind::kRecv:
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM)) {
        record(Error(cclInternalError,
                     "ib: rank " + std::to_string(peer()) +
                         " sent something other than a write "
                         "with immediate",
                     peer()));
        return;
      }
      handle_immediate(id.qp, ntohl(wc.imm_data));
      return;
    case WrKind::kDataLast:
      stripe_written(id.tag);
      return;
    default:
      return;
  }
}

void IbConnection::handle_immediate(int qp, uint32_t imm) {
  const uint32_t seq = imm_seq(imm);
  switch (imm_kind(imm)) {
    case ImmKind::kData:
      data_arrived(qp, seq);
      return;
    case ImmKind::kCts:
      if (qp != 0 || seq != (cts_arrived_ & kImmSeqMask)) {
        record(Error(cclInternalError,
                     "ib: corrupt stream from rank " + std::to_string(peer()) + ": CTS " +
                         std::to_string(seq) + " where " + std::to_string(cts_arrived_) +
                         " was expected",
                     peer()));
        return;
      }
      ++cts_arrived_;
      return;
    case ImmKind::kNotice: {
      const NoticeSlot& slot = link_.control().notice_in;
      if (slot.state == NoticeSlot::kFailed) peer_notice_ = slot.notice;
      if (slot.state == NoticeSlot::kDeparted) peer_departed_ = true;
      return;
    }
    case ImmKind::kMismatch: {
      uint64_t expected = 0;
      for (const InSegment& s : in_segments_) {
        if ((s.seq & kImmSeqMask) == seq) expected = s.recv->request->bytes;
      }
      record(Error(cclInternalError,
                   "message size mismatch with rank " + std::to_string(peer()) + ": expected " +
                       std::to_string(expected) + " bytes, the peer's send has another size",
                   peer()));
      return;
    }
  }
}

void IbConnection::data_arrived(int qp, uint32_t seq) {
  // On one QP stripes arrive in segment order: the first segment still missing this QP's stripe
  // must be the one named.
  for (InSegment& s : in_segments_) {
    if (qp >= s.stripes || (s.arrived & (1u << qp))) continue;
    if ((s.seq & kImmSeqMask) == seq) {
      s.arrived |= 1u << qp;
      return;
    }
    break;
  }
  record(Error(cclInternalError,
               "ib: corrupt stream from rank " + std::to_string(peer()) + ": data of segment " +
                   std::to_string(seq) + " on QP " + std::to_string(qp) + " out of order",
               peer()));
}

void IbConnection::stripe_written(uint32_t tag) {
  for (OutSegment& s : out_segments_) {
    if ((s.seq & 0xffffff) == tag && s.stripes_done < s.stripes) {
      ++s.stripes_done;
      return;
    }
  }
  record(Error(cclInternalError, "ib: completion of an unknown write", peer()));
}

void IbConnection::record(const Error& error) {
  if (failed_) return;
  failed_ = true;
  error_ = error;
  ready_ = true;
  CCL_WARN(kNet, "%s", error.what());
  // The CTS entries issued still name receive buffers: the peer must not write them any more.
  // A message still going out to the peer (notice, mismatch) completes first (handle()).
  if (!control_outstanding()) quiesce();
}

void IbConnection::quiesce() {
  if (quiesced_) return;
  quiesced_ = true;
  link_.to_error();
}

void IbConnection::shut_down(const Deadline& deadline) {
  if (quiesced_) return;
  while (control_outstanding() && !deadline.expired()) {
    poll();
    if (control_outstanding()) std::this_thread::yield();
  }
  quiesce();
}

void IbConnection::fail(cclResult_t code, const std::string& message) {
  Error e(code, message, peer());
  record(e);
  throw e;
}

std::optional<Error> IbConnection::peer_gone_error() const {
  if (peer_notice_) {
    try {
      throw_notice(*peer_notice_, peer());
    } catch (const Error& notice) {
      return notice;
    }
  }
  if (peer_departed_) {
    return Error(cclRemoteError,
                 "ib: rank " + std::to_string(peer()) +
                     " left the communicator (destroyed or aborted it) while this rank still "
                     "waits for it",
                 peer());
  }
  return std::nullopt;
}

void IbConnection::throw_if_peer_gone() {
  std::optional<Error> e = peer_gone_error();
  if (!e) return;
  record(*e);
  shut_down(Deadline::after(kSettleWait));
  throw *e;
}

void IbConnection::probe_if_quiet(Clock::duration quiet, bool idle_too) {
  if ((!busy() && !idle_too) || peer_departed_ || failed_ || notice_posted_ || probe_outstanding_ ||
      !link_.connected() || quiesced_)
    return;
  const auto now = Clock::now();
  if (now - last_completion_ < quiet || link_.send_space(0) == 0) return;
  int rc = link_.post_write(0, nullptr, 0, 0, link_.remote_notice_addr(), link_.remote_rkey(),
                            nullptr, true, WrKind::kProbe, 0);
  if (rc == 0) probe_outstanding_ = true;
  last_completion_ = now;
}

void IbConnection::write_notice(uint32_t state, const FailureNotice& notice) {
  if (notice_posted_) return;
  notice_posted_ = true;
  // QP 0's last send slot is kept for this (ib_link.h).
  if (!link_.connected() || quiesced_ || link_.send_space(0) == 0) {
    notice_done_ = true;
    return;
  }
  NoticeSlot& out = link_.control().notice_out;
  out.notice = notice;
  out.state = state;
  const uint32_t imm = make_imm(ImmKind::kNotice, 0);
  int rc = link_.post_write(0, &out, link_.control_lkey(), sizeof(out), link_.remote_notice_addr(),
                            link_.remote_rkey(), &imm, true, WrKind::kNotice, 0);
  if (rc != 0) notice_done_ = true;
}

void IbConnection::send_notice(const FailureNotice& notice) {
  write_notice(NoticeSlot::kFailed, notice);
}

void IbConnection::send_goodbye() { write_notice(NoticeSlot::kDeparted, FailureNotice{}); }

bool IbConnection::notice_settled() {
  if (!notice_done_) poll();
  return notice_done_;
}

void IbConnection::send_mismatch(uint64_t seq) {
  if (!link_.connected() || quiesced_ || link_.send_space(0) == 0) return;
  const uint32_t imm = make_imm(ImmKind::kMismatch, seq);
  int rc = link_.post_write(0, nullptr, 0, 0, link_.remote_notice_addr(), link_.remote_rkey(), &imm,
                            true, WrKind::kMismatch, 0);
  if (rc == 0) mismatch_outstanding_ = true;
}

}  // namespace ccl::transport::ib
