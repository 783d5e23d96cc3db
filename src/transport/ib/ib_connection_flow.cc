// The receiver-driven flow of IbConnection (ib_connection.h): CTS entries out, CTS entries
// taken, data written in stripes, segments delivered, requests completed in posting order.
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "transport/ib/ib_connection.h"

namespace ccl::transport::ib {
namespace {

// An unsignaled write retires only with a later signaled one: signal at least every so many.
constexpr uint32_t kSignalEvery = 16;

uint32_t all_stripes(int stripes) { return stripes >= 32 ? ~0u : (1u << stripes) - 1; }

}  // namespace

bool IbConnection::ensure_bounce() {
  if (bounce_ != nullptr) return true;
  const size_t bytes = options_.chunk_bytes * options_.bounce_slots;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes) != 0) {
    fail(cclSystemError,
         "ib: cannot allocate " + std::to_string(bytes) + " bytes of bounce buffer");
  }
  bounce_mr_ = device_.api().reg_mr(device_.pd(), p, bytes, IbRegCache::kRemoteWrite);
  if (bounce_mr_ == nullptr) {
    const int err = errno;
    std::free(p);
    fail(cclSystemError,
         std::string("ib: cannot register the bounce buffer: ") + std::strerror(err));
  }
  bounce_ = static_cast<std::byte*>(p);
  slot_busy_.assign(options_.bounce_slots, false);
  return true;
}

bool IbConnection::issue_cts() {
  bool moved = false;
  ControlBlock& control = link_.control();
  // QP 0's last send slot stays free for a notice or mismatch message (ib_link.h).
  while (in_segments_.size() < kFifoSlots && link_.send_space(0) > 1) {
    PendingRecv* recv = nullptr;
    for (PendingRecv& r : recvs_) {
      if (!r.issued_all) {
        recv = &r;
        break;
      }
    }
    if (recv == nullptr) break;
    const uint64_t bytes = recv->request->bytes;
    InSegment segment{next_cts_, recv, recv->issued, 0, -1, 1};
    CtsEntry& entry = control.cts_out[next_cts_ % kFifoSlots];
    if (bytes == 0) {
      entry.addr = reinterpret_cast<uintptr_t>(&control);  // nothing is written there
      entry.rkey = link_.control_rkey();
    } else if (recv->direct != nullptr) {
      segment.length = bytes - recv->issued;
      entry.addr = reinterpret_cast<uintptr_t>(recv->direct + recv->issued);
      entry.rkey = recv->rkey;
    } else {
      ensure_bounce();
      int slot = -1;
      for (size_t i = 0; i < slot_busy_.size() && slot < 0; ++i) {
        if (!slot_busy_[i]) slot = static_cast<int>(i);
      }
      if (slot < 0) break;  // every slot holds a segment not yet consumed
      slot_busy_[slot] = true;
      segment.slot = slot;
      segment.length = std::min<uint64_t>(options_.chunk_bytes, bytes - recv->issued);
      entry.addr = reinterpret_cast<uintptr_t>(bounce_ + slot * options_.chunk_bytes);
      entry.rkey = bounce_mr_->rkey;
    }
    segment.stripes = stripe_count(segment.length, link_.qps());
    entry.offset = recv->issued;
    entry.length = segment.length;
    entry.total = bytes;
    entry.seq = next_cts_ + 1;
    const uint32_t imm = make_imm(ImmKind::kCts, next_cts_);
    int rc = link_.post_write(0, &entry, link_.control_lkey(), sizeof(entry),
                              link_.remote_fifo_addr(next_cts_ % kFifoSlots), link_.remote_rkey(),
                              &imm, true, WrKind::kCts, static_cast<uint32_t>(next_cts_));
    if (rc != 0) {
      fail(cclRemoteError, "ib: posting a clear-to-send to rank " + std::to_string(peer()) +
                               " failed: " + std::strerror(rc));
    }
    recv->issued += segment.length;
    ++recv->open_segments;
    if (recv->issued == bytes) recv->issued_all = true;
    in_segments_.push_back(segment);
    ++next_cts_;
    moved = true;
  }
  return moved;
}

bool IbConnection::claim_cts() {
  bool moved = false;
  while (cts_taken_ < cts_arrived_) {
    PendingSend* send = nullptr;
    for (PendingSend& s : sends_) {
      if (!s.claimed_all) {
        send = &s;
        break;
      }
    }
    if (send == nullptr) break;  // the receiver is ahead of our posting
    const CtsEntry entry = link_.control().fifo[cts_taken_ % kFifoSlots];
    const uint64_t bytes = send->request->bytes;
    if (entry.seq != cts_taken_ + 1) {
      fail(cclInternalError, "ib: corrupt clear-to-send from rank " + std::to_string(peer()) +
                                 ": sequence " + std::to_string(entry.seq) + ", expected " +
                                 std::to_string(cts_taken_ + 1));
    }
    if (entry.total != bytes) {
      send_mismatch(cts_taken_);
      fail(cclInternalError, "message size mismatch with rank " + std::to_string(peer()) +
                                 ": sending " + std::to_string(bytes) +
                                 " bytes, the peer expects " + std::to_string(entry.total));
    }
    if (entry.offset != send->claimed || entry.length > bytes - send->claimed ||
        (entry.length == 0 && bytes != 0)) {
      fail(cclInternalError, "ib: corrupt clear-to-send from rank " + std::to_string(peer()) +
                                 ": segment at " + std::to_string(entry.offset) + " of " +
                                 std::to_string(entry.length) + " bytes");
    }
    OutSegment segment{cts_taken_,
                       send,
                       entry.offset,
                       entry.length,
                       entry.addr,
                       entry.rkey,
                       stripe_count(entry.length, link_.qps())};
    out_segments_.push_back(segment);
    send->claimed += entry.length;
    ++send->open_segments;
    if (send->claimed == bytes) send->claimed_all = true;
    ++cts_taken_;
    moved = true;
  }
  return moved;
}

bool IbConnection::post_stripe(OutSegment& s, int qp) {
  bool moved = false;
  uint64_t begin = 0, end = 0;
  stripe_range(s.length, s.stripes, qp, &begin, &end);
  const std::byte* source = s.send->request->data;
  const uint32_t reserve = qp == 0 ? 1 : 0;  // QP 0's last slot: notices (ib_link.h)
  while (!s.stripe_posted[qp] && link_.send_space(qp) > reserve) {
    const uint64_t at = begin + s.posted[qp];
    const uint64_t len = std::min<uint64_t>(options_.chunk_bytes, end - at);
    const bool last = at + len == end;
    // Signaled: a stripe's end, every kSignalEvery-th write, and the write that fills the queue
    // (so that a full queue always has a completion coming that frees it).
    const bool signaled = last || link_.next_index(qp) % kSignalEvery == kSignalEvery - 1 ||
                          link_.send_space(qp) == reserve + 1;
    const uint32_t imm = make_imm(ImmKind::kData, s.seq);
    int rc =
        link_.post_write(qp, len > 0 ? source + s.offset + at : nullptr, s.send->lkey, len,
                         s.raddr + at, s.rkey, last ? &imm : nullptr, signaled,
                         last ? WrKind::kDataLast : WrKind::kDataMid, static_cast<uint32_t>(s.seq));
    if (rc != 0) {
      fail(cclRemoteError, "ib: posting a write to rank " + std::to_string(peer()) +
                               " failed: " + std::strerror(rc));
    }
    s.posted[qp] += len;
    if (last) s.stripe_posted[qp] = true;
    moved = true;
  }
  return moved;
}

bool IbConnection::post_data() {
  bool moved = false;
  // Per QP in segment order: a stripe waits for the one before it on the same QP.
  for (int qp = 0; qp < link_.qps(); ++qp) {
    for (OutSegment& s : out_segments_) {
      if (qp >= s.stripes || s.stripe_posted[qp]) continue;
      moved |= post_stripe(s, qp);
      if (!s.stripe_posted[qp]) break;
    }
  }
  return moved;
}

bool IbConnection::complete_sends() {
  bool moved = false;
  while (!out_segments_.empty() &&
         out_segments_.front().stripes_done == out_segments_.front().stripes) {
    OutSegment& s = out_segments_.front();
    s.send->request->done_bytes += s.length;
    --s.send->open_segments;
    out_segments_.pop_front();
    moved = true;
  }
  while (!sends_.empty() && sends_.front().claimed_all && sends_.front().open_segments == 0) {
    PendingSend& s = sends_.front();
    s.request->done_bytes = s.request->bytes;
    s.request->complete = true;
    release(s.reg);
    sends_.pop_front();
    moved = true;
  }
  return moved;
}

bool IbConnection::deliver() {
  bool moved = false;
  while (!in_segments_.empty() &&
         in_segments_.front().arrived == all_stripes(in_segments_.front().stripes)) {
    InSegment& s = in_segments_.front();
    RecvRequest* request = s.recv->request;
    if (s.slot >= 0) {
      if (s.length > 0) {
        request->sink->consume(bounce_ + s.slot * options_.chunk_bytes, s.offset, s.length);
      }
      slot_busy_[s.slot] = false;
    }
    request->done_bytes += s.length;
    --s.recv->open_segments;
    in_segments_.pop_front();
    moved = true;
  }
  while (!recvs_.empty() && recvs_.front().issued_all && recvs_.front().open_segments == 0) {
    PendingRecv& r = recvs_.front();
    r.request->complete = true;
    release(r.reg);
    recvs_.pop_front();
    moved = true;
  }
  return moved;
}

}  // namespace ccl::transport::ib
