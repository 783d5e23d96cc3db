#include "transport/tcp/tcp_lane.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "transport/tcp/tcp_io.h"

namespace ccl::transport::tcp {

Lane::Lane(int index, Socket socket, int peer, const std::string& address, bool publish,
           std::function<void(InMessage&)> on_header)
    : index_(index),
      socket_(std::move(socket)),
      peer_(peer),
      address_(address),
      publish_(publish),
      on_header_(std::move(on_header)) {
  socket_.set_nonblocking(true);
  socket_.set_nodelay(true);
}

void Lane::ensure_staging() {
  if (staging_) return;
  staging_ = allocate_staging(kStagingBytes);
}

short Lane::poll_events() const {
  short events = 0;
  if (!sends_.empty()) events |= POLLOUT;
  if (!recvs_.empty() && eof_message() == nullptr && !piece_out_) {
    const RecvSegment& r = recvs_.front();
    // Staged bytes that wait for their header's check leave no room: nothing to read for now.
    const bool no_room = !r.header && r.message->direct == nullptr &&
                         (received_ - delivered_ == kStagingBytes || received_ == r.bytes);
    if (!no_room) events |= POLLIN | POLLRDHUP;
  }
  return events;
}

bool Lane::send_at_boundary() const {
  return sends_.empty() || (sends_.front().header && sent_ == 0);
}

bool Lane::recv_at_boundary() const {
  return recvs_.empty() || (recvs_.front().header && received_ == 0);
}

bool Lane::send_step(size_t budget) {
  bool moved = false;
  while (!sends_.empty() && budget > 0) {
    iovec iov[kMaxSendIov];
    int count = 0;
    size_t want = 0;
    size_t skip = sent_;
    for (const SendSegment& s : sends_) {
      if (count == kMaxSendIov || want >= kMaxGatherBytes) break;
      iov[count++] = {const_cast<std::byte*>(s.data) + skip, s.bytes - skip};
      want += s.bytes - skip;
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t written = ::sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (is_transient(errno)) break;
      fail_errno("send", errno);
    }
    moved = true;
    size_t left = static_cast<size_t>(written);
    budget -= std::min(budget, left);
    while (left > 0) {
      SendSegment& s = sends_.front();
      const size_t take = std::min(left, s.bytes - sent_);
      sent_ += take;
      left -= take;
      if (!s.header) s.message->moved.fetch_add(take, std::memory_order_relaxed);
      if (sent_ < s.bytes) break;
      s.message->segments_left.fetch_sub(1, std::memory_order_release);
      sends_.pop_front();
      sent_ = 0;
      ++finished_;
    }
    if (static_cast<size_t>(written) < want) break;  // the socket buffer is full
  }
  return moved;
}

void Lane::finish_recv_segment() {
  recvs_.front().message->segments_left.fetch_sub(1, std::memory_order_release);
  recvs_.pop_front();
  received_ = 0;
  delivered_ = 0;
  ++finished_;
}

bool Lane::settle_staged() {
  const RecvSegment& r = recvs_.front();
  InMessage& m = *r.message;
  const size_t staged = received_ - delivered_;
  const bool last = received_ == r.bytes;
  // Whole multiples of kPieceAlign; the tail of a segment (< kPieceAlign) waits for more bytes.
  // Segments start at multiples of it and end at one or at the message's end.
  const size_t n = last ? staged : staged - staged % kPieceAlign;
  if (n == 0) return last && delivered_ == r.bytes;
  if (!m.header_ok.load(std::memory_order_acquire)) return false;
  if (publish_) {
    piece_ = Piece{&m, staging_.get(), r.offset + delivered_, n};
    piece_out_ = true;
    piece_taken_ = false;
    ++finished_;  // wakes the caller
    return false;
  }
  m.request->sink->consume(staging_.get(), r.offset + delivered_, n);
  m.moved.fetch_add(n, std::memory_order_relaxed);
  delivered_ += n;
  if (received_ > delivered_) std::memmove(staging_.get(), staging_.get() + n, staged - n);
  return delivered_ == r.bytes;
}

void Lane::release_piece() {
  if (!piece_out_) return;
  const size_t n = piece_.bytes;
  const size_t staged = received_ - delivered_;
  piece_out_ = false;
  piece_taken_ = false;
  delivered_ += n;
  piece_.message->moved.fetch_add(n, std::memory_order_relaxed);
  if (staged > n) std::memmove(staging_.get(), staging_.get() + n, staged - n);
  if (delivered_ == recvs_.front().bytes) finish_recv_segment();
}

bool Lane::recv_step(size_t budget) {
  bool moved = false;
  while (!recvs_.empty() && budget > 0 && !piece_out_ && eof_message() == nullptr) {
    RecvSegment* r = &recvs_.front();
    InMessage* m = r->message;
    iovec iov[2];
    int count = 0;
    RecvSegment* payload = nullptr;  // the segment the payload iov reads into
    size_t payload_got = 0;          // its bytes read so far
    if (r->header) {
      iov[count++] = {reinterpret_cast<char*>(&m->header) + received_,
                      sizeof(FrameHeader) - received_};
      // A payload on this lane right behind its header comes in the same call.
      if (recvs_.size() > 1 && recvs_[1].message == m) payload = &recvs_[1];
    } else {
      payload = r;
      payload_got = received_;
    }
    if (payload != nullptr) {
      if (m->direct != nullptr) {
        iov[count++] = {m->direct + payload->offset + payload_got, payload->bytes - payload_got};
      } else {
        ensure_staging();
        const size_t staged = payload_got - (payload == r ? delivered_ : 0);
        const size_t room = std::min(kStagingBytes - staged, payload->bytes - payload_got);
        if (room == 0) {
          // Staging full: only a checked header lets it drain.
          if (payload == r && settle_staged()) {
            finish_recv_segment();
            continue;
          }
          if (payload == r) break;
        } else {
          iov[count++] = {staging_.get() + staged, room};
        }
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
    if (got == 0) {
      eof_message_.store(m, std::memory_order_release);
      ++finished_;  // wakes the caller, which fails the message once it is the oldest
      return moved;
    }
    moved = true;
    size_t left = static_cast<size_t>(got);
    budget -= std::min(budget, left);
    if (r->header) {
      const size_t take = std::min(left, sizeof(FrameHeader) - received_);
      received_ += take;
      left -= take;
      if (received_ < sizeof(FrameHeader)) break;  // the rest of the header is in flight
      on_header_(*m);                              // throws if it is wrong
      finish_recv_segment();
      if (payload == nullptr) continue;
      r = &recvs_.front();  // the payload, now at the front
    }
    received_ += left;
    if (m->direct != nullptr) {
      m->moved.fetch_add(left, std::memory_order_relaxed);
      if (received_ == r->bytes) finish_recv_segment();
    } else if (settle_staged()) {
      finish_recv_segment();
    }
    if (static_cast<size_t>(got) < want) break;  // drained for now
  }
  return moved;
}

void Lane::fail_errno(const char* what, int err) {
  if (err == EPIPE || err == ECONNRESET) {
    throw_peer_error(cclRemoteError, peer_, "tcp: connection to rank %d (%s, socket %d) closed",
                     peer_, address_.c_str(), index_);
  }
  throw_peer_error(cclRemoteError, peer_,
                   "tcp: %s on connection to rank %d (%s, socket %d) failed: %s", what, peer_,
                   address_.c_str(), index_, std::strerror(err));
}

}  // namespace ccl::transport::tcp
