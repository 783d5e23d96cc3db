// UcxConnection: setup, the control and notice channels, failures and teardown. The send path is
// in ucx_connection_send.cc, the receive path in ucx_connection_recv.cc.
#include "transport/ucx/ucx_connection.h"

#include <cstring>
#include <string>

#include "base/log.h"

namespace ccl::transport::ucx {

UcxConnection::UcxConnection(int peer, int self, UcxWorker& worker)
    : Connection(peer), self_(self), worker_(worker), staging_(kStagingBuffers) {}

UcxConnection::~UcxConnection() = default;

void UcxConnection::on_endpoint_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* self = static_cast<UcxConnection*>(arg);
  if (self->endpoint_status_ != UCS_OK) return;
  self->endpoint_status_ = status;
  CCL_INFO(kNet, "ucx: rank %d: endpoint to rank %d failed: %s", self->self_, self->peer(),
           ucs_status_string(status));
}

void UcxConnection::start_hello(int nranks, uint64_t tag_hash) {
  hello_out_ = HelloWire{kHelloMagic, kHelloVersion, 0, self_, nranks, tag_hash};
  ucp_request_param_t recv_param = polled_recv_param();
  hello_recv_.reset(ucp_tag_recv_nbx(worker_.worker(), &hello_in_, sizeof(hello_in_),
                                     make_tag(Channel::kHello, peer()), kPeerChannelMask,
                                     &recv_param));
  hello_send_.reset(send_tagged(&hello_out_, sizeof(hello_out_), make_tag(Channel::kHello, self_)));
}

bool UcxConnection::hello_done(int nranks, uint64_t tag_hash) {
  if (endpoint_failed()) {
    throw_peer_error(cclRemoteError, peer(), "ucx: cannot reach rank %d: %s", peer(),
                     ucs_status_string(endpoint_status_));
  }
  const bool sent = !hello_send_.active() || hello_send_.done();
  const bool received = !hello_recv_.active() || hello_recv_.done_recv();
  if (hello_send_.active() && sent) {
    if (hello_send_.status() != UCS_OK) {
      throw_peer_error(cclRemoteError, peer(), "ucx: hello to rank %d failed: %s", peer(),
                       ucs_status_string(hello_send_.status()));
    }
    hello_send_.release();
  }
  if (hello_recv_.active() && received) {
    const ucs_status_t status = hello_recv_.status();
    const size_t length = hello_recv_.received().length;
    hello_recv_.release();
    if (status != UCS_OK || length != sizeof(HelloWire) || hello_in_.magic != kHelloMagic ||
        hello_in_.version != kHelloVersion || hello_in_.rank != peer() ||
        hello_in_.nranks != nranks || hello_in_.tag_hash != tag_hash) {
      throw_peer_error(cclRemoteError, peer(),
                       "ucx: the worker published as rank %d of this communicator did not "
                       "answer as one (%s)",
                       peer(), status != UCS_OK ? ucs_status_string(status) : "a wrong hello");
    }
  }
  return sent && received;
}

void UcxConnection::start(bool rma) {
  rma_ = rma;
  post_control_recv();
  ucp_request_param_t param = polled_recv_param();
  notice_recv_.reset(ucp_tag_recv_nbx(worker_.worker(), &notice_in_buffer_,
                                      sizeof(notice_in_buffer_), make_tag(Channel::kNotice, peer()),
                                      kPeerChannelMask, &param));
}

bool UcxConnection::progress() {
  if (failed_) {
    close_after_failure();
    if (!busy()) return false;
    throw error_;
  }
  bool moved = worker_.progress();
  return advance() || moved;
}

bool UcxConnection::advance() {
  if (failed_) {
    close_after_failure();
    if (!busy()) return false;
    throw error_;
  }
  try {
    bool moved = poll_controls();
    moved |= advance_sends();
    moved |= advance_recvs();
    moved |= reap_control_sends();
    check_failures();
    return moved;
  } catch (const Error& e) {
    if (failed_) throw;
    fail(e);
  }
}

bool UcxConnection::incoming() {
  if (!recvs_.empty()) return false;
  if (failed_ || endpoint_failed()) return true;  // a receive from this peer reports the failure
  progress();  // idle: takes the control messages (announcements) that arrived
  if (poll_notice() && failure_notice().has_value()) return true;
  // The next message announced (RMA handshake), or its chunk 0 flagged point-to-point.
  if (auto announced = ready_to_send_.find(recv_sequence_); announced != ready_to_send_.end()) {
    return announced->second.point_to_point;
  }
  ucp_tag_recv_info_t info{};
  return ucp_tag_probe_nb(
             worker_.worker(),
             make_tag(Channel::kPayload, peer(), recv_sequence_, 0) | kPointToPointFlag,
             kPayloadRecvMask | kPointToPointFlag, 0, &info) != nullptr;
}

// Whatever completed has been taken. A kFailed notice fails the connection at once (it ends every
// wait). A goodbye, an abort or an endpoint error after either fails it only for a request the
// peer will never serve: a send to it, or a receive of a message it had not completed when it
// said its last word (NoticeWire::sent); earlier messages may still be in UCX's queues, behind
// the notice. An endpoint error without a notice (the peer crashed) fails it, once what UCX has
// already received is taken.
void UcxConnection::check_failures() {
  if (!busy()) return;
  if (poll_notice()) {
    check_notice();
    return;
  }
  if (!endpoint_failed()) return;
  // The error may have overtaken data or the notice that UCX holds already: take them first.
  for (int i = 0; i < kDrainProgressCalls && worker_.progress(); ++i) {
  }
  poll_controls();
  advance_sends();
  advance_recvs();
  if (!busy()) return;
  if (poll_notice()) {
    check_notice();
    return;
  }
  fail_status("connection lost", endpoint_status_);
}

void UcxConnection::check_notice() {
  if (notice_in_->kind != kDeparted && notice_in_->kind != FailureNotice::kAborted) {
    fail_with_notice();
  }
  bool unserved = !sends_.empty();
  for (const IncomingMessage& m : recvs_) unserved |= m.sequence >= notice_in_->sent;
  if (!unserved) return;
  if (departed()) {
    fail(Error(cclRemoteError,
               "ucx: rank " + std::to_string(peer()) +
                   " destroyed its communicator while this rank still has messages with it",
               peer()));
  }
  fail_with_notice();
}

uint64_t UcxConnection::sent_prefix() {
  for (OutgoingMessage& m : sends_) {
    bool complete = m.chunks_done == m.chunks;
    if (!complete && m.stage == OutgoingMessage::Stage::kTagged && m.next_chunk == m.chunks) {
      complete = true;
      for (ChunkSend& c : m.in_flight) complete &= c.op.done() && c.op.status() == UCS_OK;
    }
    if (!complete) return m.sequence;
  }
  return send_sequence_;
}

// --- Failures -------------------------------------------------------------------------------

void UcxConnection::fail(const Error& error) {
  failed_ = true;
  error_ = error;
  cancel_chunk_receives();
  // A peer that is gone or failed needs no notice from this rank: close now. Otherwise once the
  // notice the communicator sends (notify_failure) has left, or at teardown.
  close_after_failure();
  CCL_WARN(kNet, "%s", error.what());
  throw error_;
}

void UcxConnection::close_after_failure() {
  if (!failed_ || ep_ == nullptr) return;
  const bool peer_gone = notice_in_.has_value() || endpoint_failed();
  if (!peer_gone && !(notice_sent_ && goodbye_sent())) return;
  // UCX drops the endpoint's requests (puts, chunk sends, rendezvous in progress), so that it
  // stops using the caller's buffers; the close request is completed at teardown.
  failure_close_ = close_endpoint();
}

void UcxConnection::fail_status(const char* what, ucs_status_t status) {
  fail(Error(cclRemoteError,
             "ucx: " + std::string(what) + " with rank " + std::to_string(peer()) + ": " +
                 ucs_status_string(status),
             peer()));
}

void UcxConnection::fail_with_notice() {
  if (!notice_in_ || notice_in_->kind == kDeparted) {
    fail(Error(cclInternalError, "ucx: no failure notice from rank " + std::to_string(peer())));
  }
  notice_reported_ = true;
  try {
    throw_notice(*failure_notice(), peer());
  } catch (const Error& e) {
    if (failed_) throw;
    fail(e);
  }
}

bool UcxConnection::take_unreported_failure() {
  if (notice_reported_ || !poll_notice() || departed()) return false;
  if (notice_in_->kind != FailureNotice::kFailed) return false;
  return true;
}

// --- Notices ---------------------------------------------------------------------------------

void UcxConnection::send_notice(const NoticeWire& notice) {
  if (notice_sent_ || ep_ == nullptr || endpoint_failed()) return;
  notice_sent_ = true;
  notice_out_ = notice;
  notice_out_.sent = sent_prefix();
  notice_send_.reset(
      send_tagged(&notice_out_, sizeof(notice_out_), make_tag(Channel::kNotice, self_)));
}

bool UcxConnection::poll_notice() {
  if (notice_in_) return true;
  if (!notice_recv_.active() || !notice_recv_.done_recv()) return false;
  const ucs_status_t status = notice_recv_.status();
  const size_t length = notice_recv_.received().length;
  notice_recv_.release();
  if (status != UCS_OK) return false;  // cancelled at teardown
  if (length != sizeof(NoticeWire) || notice_in_buffer_.magic != kNoticeMagic) {
    // Not a notice of ours: still the peer's last word, as a failure without a culprit.
    notice_in_buffer_ =
        NoticeWire{kNoticeMagic, FailureNotice::kFailed, cclRemoteError, peer(), -1, 0, 0};
  }
  notice_in_ = notice_in_buffer_;
  CCL_INFO(kNet, "ucx: rank %d: notice from rank %d (kind %d, origin %d, culprit %d)", self_,
           peer(), notice_in_->kind, notice_in_->origin, notice_in_->culprit);
  return true;
}

std::optional<FailureNotice> UcxConnection::failure_notice() const {
  if (!notice_in_ || notice_in_->kind == kDeparted) return std::nullopt;
  FailureNotice notice;
  notice.code = notice_in_->code;
  notice.kind = notice_in_->kind == FailureNotice::kAborted ? FailureNotice::kAborted
                                                            : FailureNotice::kFailed;
  notice.origin = notice_in_->origin;
  notice.culprit = notice_in_->culprit;
  return notice;
}

// --- Control channel -------------------------------------------------------------------------

void UcxConnection::post_control_recv() {
  ucp_request_param_t param = polled_recv_param();
  control_recv_.reset(ucp_tag_recv_nbx(worker_.worker(), &control_in_, sizeof(control_in_),
                                       make_tag(Channel::kControl, peer()), kPeerChannelMask,
                                       &param));
}

bool UcxConnection::poll_controls() {
  bool moved = false;
  // Several may be waiting in UCX's unexpected queue: each repost can complete at once.
  while (control_recv_.active() && control_recv_.done_recv()) {
    const ucs_status_t status = control_recv_.status();
    const size_t length = control_recv_.received().length;
    control_recv_.release();
    if (status == UCS_ERR_CANCELED) return moved;
    if (status != UCS_OK) fail_status("control message", status);
    const ControlWire control = control_in_;
    post_control_recv();
    handle_control(control, length);
    moved = true;
  }
  return moved;
}

void UcxConnection::handle_control(const ControlWire& control, size_t length) {
  const size_t header = offsetof(ControlWire, packed);
  if (length < header || control.magic != kControlMagic ||
      control.packed_bytes > TransportKey::kMaxPacked || length < header + control.packed_bytes) {
    fail(Error(cclRemoteError, "ucx: corrupt control message from rank " + std::to_string(peer()),
               peer()));
  }
  switch (control.kind) {
    case ControlWire::kReadyToSend: {
      if (IncomingMessage* m = find_recv(control.sequence)) {
        answer_ready_to_send(*m, control.bytes);
      } else if (control.sequence >= recv_sequence_) {
        // Kept until the receive is posted: bounded, so that a peer cannot grow the map at will.
        if (control.sequence - recv_sequence_ >= kMaxMessagesAhead ||
            !ready_to_send_
                 .emplace(control.sequence, Announced{control.bytes, control.point_to_point != 0})
                 .second) {
          fail(Error(cclRemoteError,
                     "ucx: rank " + std::to_string(peer()) + " is ready to send message " +
                         std::to_string(control.sequence) + " (this rank expects message " +
                         std::to_string(recv_sequence_) + " next, or had that one announced)",
                     peer()));
        }
      } else {
        fail(Error(cclInternalError,
                   "ucx: rank " + std::to_string(peer()) + " is ready to send message " +
                       std::to_string(control.sequence) + ", which this rank received already",
                   peer()));
      }
      return;
    }
    case ControlWire::kOffer:
    case ControlWire::kGo: {
      OutgoingMessage* m = find_send(control.sequence);
      if (m == nullptr || m->stage != OutgoingMessage::Stage::kAwaitingReply) {
        fail(Error(cclInternalError,
                   "ucx: rank " + std::to_string(peer()) + " answered message " +
                       std::to_string(control.sequence) + ", which does not wait for an answer",
                   peer()));
      }
      if (control.bytes != m->request->bytes) {
        fail(Error(cclInternalError,
                   "message size mismatch with rank " + std::to_string(peer()) + ": sending " +
                       std::to_string(m->request->bytes) + " bytes, peer expects " +
                       std::to_string(control.bytes),
                   peer()));
      }
      if (control.kind == ControlWire::kGo) {
        m->stage = OutgoingMessage::Stage::kTagged;
        ++stats_.tagged_messages;
      } else {
        // The packed key is the peer's input to ucp_ep_rkey_unpack: exactly the bytes it sent.
        if (control.packed_bytes == 0 || length != header + control.packed_bytes) {
          fail(Error(cclRemoteError,
                     "ucx: rank " + std::to_string(peer()) + " offered message " +
                         std::to_string(control.sequence) + " with a malformed remote key (" +
                         std::to_string(control.packed_bytes) + " bytes in a control message of " +
                         std::to_string(length) + ")",
                     peer()));
        }
        start_rma(*m, control);
      }
      return;
    }
    default:
      fail(Error(cclInternalError,
                 "ucx: control message of unknown kind " + std::to_string(control.kind) +
                     " from rank " + std::to_string(peer()),
                 peer()));
  }
}

void UcxConnection::send_control(ControlWire::Kind kind, uint64_t sequence, uint64_t bytes,
                                 const RegisteredRegion* region, const std::byte* address,
                                 bool point_to_point) {
  auto wire = std::make_unique<ControlWire>();
  wire->magic = kControlMagic;
  wire->kind = kind;
  wire->sequence = sequence;
  wire->bytes = bytes;
  wire->point_to_point = point_to_point ? 1 : 0;
  size_t length = offsetof(ControlWire, packed);
  if (region != nullptr) {
    const TransportKey* key = region->key_of("ucx");
    wire->address = reinterpret_cast<uintptr_t>(address);
    wire->region_id = region->id;
    wire->packed_bytes = key->packed_bytes;
    std::memcpy(wire->packed, key->packed.data(), key->packed_bytes);
    length += key->packed_bytes;
  }
  PendingOp op(send_tagged(wire.get(), length, make_tag(Channel::kControl, self_, sequence)));
  if (op.done()) {
    if (op.status() != UCS_OK) fail_status("control message", op.status());
    return;
  }
  control_sends_.push_back(ControlSend{std::move(wire), std::move(op)});
}

bool UcxConnection::reap_control_sends() {
  bool moved = false;
  for (auto it = control_sends_.begin(); it != control_sends_.end();) {
    if (!it->op.done()) {
      ++it;
      continue;
    }
    if (it->op.status() != UCS_OK) fail_status("control message", it->op.status());
    it = control_sends_.erase(it);
    moved = true;
  }
  return moved;
}

// --- Teardown --------------------------------------------------------------------------------

void UcxConnection::begin_shutdown() {
  cancel_chunk_receives();
  control_recv_.cancel(worker_.worker());
  // The notice receive stays: the peer's goodbye is on its way too, and a message that finds no
  // receive stays in UCX's unexpected queue, which warns about it at the worker's destruction
  // ("unexpected tag-receive descriptor ... was not matched", once per peer in every clean job).
  hello_recv_.cancel(worker_.worker());
  if (!failed_) send_notice(NoticeWire{kNoticeMagic, kDeparted, 0, self_, -1, 0, 0});
  // Every earlier operation on the endpoint, the goodbye included, is to complete at the peer
  // before the forced close, which drops what UCX still holds.
  if (ep_ != nullptr && !endpoint_failed()) {
    ucp_request_param_t param = polled_param();
    shutdown_flush_.reset(ucp_ep_flush_nbx(ep_, &param));
  }
}

bool UcxConnection::goodbye_sent() { return !notice_send_.active() || notice_send_.done(); }

bool UcxConnection::shutdown_flushed() {
  if (!goodbye_sent() || (shutdown_flush_.active() && !shutdown_flush_.done())) return false;
  // The peer's last word is in (its goodbye, or a notice it sent before), or none will come.
  return poll_notice() || failed_ || endpoint_failed() || !notice_recv_.active();
}

PendingOp UcxConnection::close_endpoint() {
  if (ep_ == nullptr) return std::move(failure_close_);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  PendingOp op(ucp_ep_close_nbx(ep_, &param));
  ep_ = nullptr;
  return op;
}

void UcxConnection::release_requests() {
  for (OutgoingMessage& m : sends_) {
    for (ChunkSend& c : m.in_flight) c.op.release();
    m.put.release();
    m.flush.release();
    m.done_send.release();
  }
  for (IncomingMessage& m : recvs_) {
    for (ChunkRecv& c : m.in_flight) c.op.release();
  }
  for (ControlSend& c : control_sends_) c.op.release();
  control_recv_.release();
  notice_recv_.cancel(worker_.worker());  // no goodbye within the bound (begin_shutdown)
  notice_recv_.release();
  notice_send_.release();
  hello_send_.release();
  hello_recv_.release();
  shutdown_flush_.release();
  failure_close_.release();
  // After the closes: a put may use its key until its endpoint is closed.
  rkeys_.clear();
}

}  // namespace ccl::transport::ucx
