#include "transport/tcp/tcp_connection.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "transport/posted_request.h"
#include "transport/tcp/tcp_io.h"

namespace ccl::transport::tcp {

TcpConnection::TcpConnection(int peer, Socket socket, std::string peer_address)
    : Connection(peer), socket_(std::move(socket)), peer_address_(std::move(peer_address)) {
  socket_.set_nonblocking(true);
  socket_.set_nodelay(true);
}

TcpConnection::~TcpConnection() {
  // A goodbye, so that a peer still running does not take our exit for a crash.
  if (!notice_sent_ && socket_.valid())
    send_at_boundary(NoticeFrame{kNoticeMagic, 0, kDeparted, -1, -1});
}

void TcpConnection::send_at_boundary(const NoticeFrame& frame) {
  // Only where the next bytes of our stream are a header (no message half sent). 16 bytes into a
  // socket fit unless its send buffer is full; then the peer reads a cut header before the end
  // of the stream, which is a failure too.
  if (!sends_.empty() && sends_.front().sent != 0) return;
  [[maybe_unused]] ssize_t n =
      ::send(socket_.fd(), &frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t TcpConnection::peek_frame(NoticeFrame* frame) {
  ssize_t n;
  do {
    n = ::recv(socket_.fd(), frame, sizeof(*frame), MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n;
}

void TcpConnection::send_notice(const FailureNotice& notice) {
  if (notice_sent_ || !socket_.valid()) return;
  notice_sent_ = true;
  send_at_boundary(frame_of(notice));
  ::shutdown(socket_.fd(), SHUT_WR);
}

bool TcpConnection::idle_peer_gone(bool abort_fails) {
  NoticeFrame frame{};
  const ssize_t n = peek_frame(&frame);
  const IdlePeek peek = classify_idle_peek(n, errno, frame, abort_fails);
  if (peek != IdlePeek::kNotice) return peek == IdlePeek::kGone;
  fail_notice(frame);
}

bool TcpConnection::incoming() {
  if (!recvs_.empty()) return false;
  if (failed_) return true;  // a receive from this peer reports its failure
  if (!socket_.valid()) return false;
  NoticeFrame frame{};
  const ssize_t n = peek_frame(&frame);
  return message_waiting(n, errno, frame);
}

std::optional<FailureNotice> TcpConnection::peek_notice() {
  if (notice_received_ || !socket_.valid()) return notice_received_;
  // Only at a message boundary are the next bytes a header.
  if (in_started_ && (in_header_got_ != 0 || staged_ != 0)) return std::nullopt;
  NoticeFrame frame{};
  if (peek_frame(&frame) != static_cast<ssize_t>(sizeof(frame)) || frame.magic != kNoticeMagic ||
      frame.kind == kDeparted) {
    return std::nullopt;
  }
  return notice_of(frame);
}

void TcpConnection::fail_notice(const NoticeFrame& frame) {
  const FailureNotice notice = notice_of(frame);
  notice_received_ = notice;
  try {
    throw_notice(notice, peer());
  } catch (const Error& e) {
    fail(e);
  }
}

void TcpConnection::post_send(SendRequest* request) {
  start_send("tcp", request, peer());
  sends_.push_back(PendingSend{
      request, FrameHeader{frame_magic(request->point_to_point), send_sequence_++, request->bytes},
      0});
}

void TcpConnection::post_recv(RecvRequest* request) {
  start_recv("tcp", request, peer());
  recvs_.push_back(request);
}

short TcpConnection::poll_events() const {
  short events = 0;
  if (!sends_.empty()) events |= POLLOUT;
  // POLLRDHUP: a peer that closed while we wait for its data is seen at once.
  if (!recvs_.empty()) events |= POLLIN | POLLRDHUP;
  return events;
}

bool TcpConnection::progress() {
  if (failed_) {
    if (!busy()) return false;
    throw error_;
  }
  // Sends first: a ping-pong's reply leaves before we look for the next message.
  bool moved = progress_sends();
  moved |= progress_recvs();
  return moved;
}

bool TcpConnection::progress_sends() {
  bool moved = false;
  size_t budget = kProgressBudget;
  while (!sends_.empty() && budget > 0) {
    iovec iov[kMaxSendIov];
    int count = 0;
    size_t want = 0;
    for (PendingSend& s : sends_) {
      if (count + 2 > kMaxSendIov || want >= kMaxGatherBytes) break;
      if (s.sent < sizeof(FrameHeader)) {
        size_t len = sizeof(FrameHeader) - s.sent;
        iov[count++] = {reinterpret_cast<char*>(&s.header) + s.sent, len};
        want += len;
      }
      size_t payload_sent = s.sent > sizeof(FrameHeader) ? s.sent - sizeof(FrameHeader) : 0;
      if (payload_sent < s.request->bytes) {
        size_t len = s.request->bytes - payload_sent;
        iov[count++] = {const_cast<std::byte*>(s.request->data) + payload_sent, len};
        want += len;
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    ssize_t written = ::sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (is_transient(errno)) break;
      fail_errno("send", errno);
    }
    moved = true;
    size_t left = static_cast<size_t>(written);
    budget -= std::min(budget, left);
    while (left > 0 && !sends_.empty()) {
      PendingSend& s = sends_.front();
      size_t total = sizeof(FrameHeader) + s.request->bytes;
      size_t take = std::min(left, total - s.sent);
      s.sent += take;
      left -= take;
      s.request->done_bytes = s.sent > sizeof(FrameHeader) ? s.sent - sizeof(FrameHeader) : 0;
      if (s.sent < total) break;
      s.request->complete = true;
      sends_.pop_front();
    }
    if (static_cast<size_t>(written) < want) break;  // the socket buffer is full
  }
  return moved;
}

bool TcpConnection::progress_recvs() {
  bool moved = false;
  size_t budget = kProgressBudget;
  while (!recvs_.empty() && budget > 0) {
    RecvRequest& request = *recvs_.front();
    if (!in_started_) {
      in_started_ = true;
      in_header_got_ = 0;
      staged_ = 0;
      in_direct_ = request.sink != nullptr ? request.sink->direct_destination() : nullptr;
      if (in_direct_ == nullptr && request.bytes > 0 && !staging_) {
        staging_ = allocate_staging(kStagingBytes);
      }
    }
    size_t received = request.done_bytes + staged_;  // payload bytes taken from the socket
    iovec iov[2];
    int count = 0;
    if (in_header_got_ < sizeof(FrameHeader)) {
      iov[count++] = {reinterpret_cast<char*>(&in_header_) + in_header_got_,
                      sizeof(FrameHeader) - in_header_got_};
    }
    // Until the header is checked we trust the posted size: a peer that disagrees is caught
    // before any staged byte reaches the sink.
    if (received < request.bytes) {
      size_t remaining = request.bytes - received;
      if (in_direct_ != nullptr) {
        iov[count++] = {in_direct_ + received, remaining};
      } else {
        iov[count++] = {staging_.get() + staged_, std::min(remaining, kStagingBytes - staged_)};
      }
    }
    size_t want = 0;
    for (int i = 0; i < count; ++i) want += iov[i].iov_len;
    ssize_t got = ::readv(socket_.fd(), iov, count);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (is_transient(errno)) break;
      fail_errno("receive", errno);
    }
    if (got == 0) fail_closed();
    moved = true;
    size_t left = static_cast<size_t>(got);
    budget -= std::min(budget, left);
    if (in_header_got_ < sizeof(FrameHeader)) {
      size_t take = std::min(left, sizeof(FrameHeader) - in_header_got_);
      in_header_got_ += take;
      left -= take;
      if (in_header_got_ < sizeof(FrameHeader)) break;  // the rest of the header is in flight
      check_header(request);
    }
    if (in_direct_ != nullptr) {
      request.done_bytes += left;
    } else {
      staged_ += left;
      deliver_staged(request);
    }
    if (request.done_bytes == request.bytes) {
      finish_recv(request);
    } else if (static_cast<size_t>(got) < want) {
      break;  // the socket is drained for now
    }
  }
  return moved;
}

void TcpConnection::check_header(const RecvRequest& request) {
  if (in_header_.magic == kNoticeMagic) {
    NoticeFrame frame;
    static_assert(sizeof(frame) == sizeof(in_header_));
    std::memcpy(&frame, &in_header_, sizeof(frame));
    if (frame.kind == kDeparted) {
      fail(Error(cclRemoteError,
                 "tcp: connection to rank " + std::to_string(peer()) + " (" + peer_address_ +
                     "): the peer destroyed its communicator while this rank still expects a "
                     "message",
                 peer()));
    }
    fail_notice(frame);
  }
  if (!is_frame_magic(in_header_.magic) || in_header_.sequence != recv_sequence_) {
    fail(cclInternalError, std::string("tcp: corrupt stream from rank ") + std::to_string(peer()) +
                               " (" + peer_address_ + "): bad frame header (magic " +
                               std::to_string(in_header_.magic) + ", sequence " +
                               std::to_string(in_header_.sequence) + ", expected " +
                               std::to_string(recv_sequence_) + ")");
  }
  if (in_header_.bytes != request.bytes) {
    fail(cclInternalError, "message size mismatch with rank " + std::to_string(peer()) +
                               ": expected " + std::to_string(request.bytes) +
                               " bytes, peer sent " + std::to_string(in_header_.bytes));
  }
}

void TcpConnection::deliver_staged(RecvRequest& request) {
  bool last = request.done_bytes + staged_ == request.bytes;
  // Keep pieces whole multiples of kPieceAlign; the tail (< kPieceAlign) waits for more bytes.
  size_t deliver = last ? staged_ : staged_ - staged_ % kPieceAlign;
  if (deliver == 0) return;
  request.sink->consume(staging_.get(), request.done_bytes, deliver);
  request.done_bytes += deliver;
  staged_ -= deliver;
  if (staged_ > 0) std::memmove(staging_.get(), staging_.get() + deliver, staged_);
}

void TcpConnection::finish_recv(RecvRequest& request) {
  request.complete = true;
  recvs_.pop_front();
  ++recv_sequence_;
  in_started_ = false;
  in_direct_ = nullptr;
  staged_ = 0;
}

void TcpConnection::fail(cclResult_t code, const std::string& message) {
  fail(Error(code, message, peer()));
}

void TcpConnection::fail(const Error& error) {
  failed_ = true;
  error_ = error;
  CCL_WARN(kNet, "%s", error.what());
  throw error_;
}

void TcpConnection::fail_closed() {
  fail(cclRemoteError,
       "tcp: connection to rank " + std::to_string(peer()) + " (" + peer_address_ + ") closed");
}

void TcpConnection::fail_errno(const char* what, int err) {
  if (err == EPIPE || err == ECONNRESET) fail_closed();
  fail(cclRemoteError, std::string("tcp: ") + what + " on connection to rank " +
                           std::to_string(peer()) + " (" + peer_address_ +
                           ") failed: " + std::strerror(err));
}

}  // namespace ccl::transport::tcp
