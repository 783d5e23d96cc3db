#include "transport/tcp/tcp_multi_connection.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "transport/posted_request.h"
#include "transport/tcp/tcp_chunks.h"
#include "transport/tcp/tcp_io.h"

namespace ccl::transport::tcp {
namespace {

// A helper sleeps at most this long in poll(), so that it never sleeps unbounded.
constexpr int kWorkerSliceMs = 100;

void write_eventfd(int fd) {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
}

}  // namespace

MultiConnection::MultiConnection(int peer, std::vector<Socket> sockets, std::string peer_address,
                                 int nthreads, int wake_fd)
    : Connection(peer), peer_address_(std::move(peer_address)), wake_fd_(wake_fd) {
  const int n = static_cast<int>(sockets.size());
  const int nworkers = nthreads > 1 ? std::min(nthreads, n - 1) : 0;
  owner_.assign(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    if (i > 0 && nworkers > 0) owner_[i] = (i - 1) % nworkers;
    auto on_header = [this](InMessage& m) { check_header(m); };
    lanes_.push_back(std::make_unique<Lane>(i, std::move(sockets[i]), peer, peer_address_,
                                            /*publish=*/owner_[i] >= 0, on_header));
    if (owner_[i] < 0) mine_.push_back(lanes_.back().get());
  }
  for (int w = 0; w < nworkers; ++w) {
    auto worker = std::make_unique<Worker>();
    int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
      stop_workers();
      throw_system_error(errno, "tcp: eventfd");
    }
    worker->event = Socket(fd);
    for (int i = 0; i < n; ++i) {
      if (owner_[i] == w) worker->lanes.push_back(lanes_[i].get());
    }
    workers_.push_back(std::move(worker));
  }
  try {
    for (auto& w : workers_) {
      Worker* raw = w.get();
      w->thread = std::thread([this, raw] { run_worker(*raw); });
    }
  } catch (...) {
    stop_workers();  // joins the helpers already started: no joinable thread unwinds
    throw;
  }
}

MultiConnection::~MultiConnection() {
  stop_workers();
  // A goodbye, so that a peer still running does not take our exit for a crash.
  if (!notice_sent_) send_at_boundary(NoticeFrame{kNoticeMagic, 0, kDeparted, -1, -1});
}

void MultiConnection::poke(const Worker& w) { write_eventfd(w.event.fd()); }

void MultiConnection::stop_workers() {
  if (workers_stopped_) return;
  workers_stopped_ = true;
  for (auto& w : workers_) {
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      w->stop = true;
    }
    poke(*w);
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void MultiConnection::run_worker(Worker& w) {
  std::vector<pollfd> fds;
  bool failed = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(w.mutex);
      if (w.stop) return;
      for (auto& [lane, s] : w.new_sends) lane->push_send(s);
      for (auto& [lane, r] : w.new_recvs) lane->push_recv(r);
      w.new_sends.clear();
      w.new_recvs.clear();
      for (Lane* lane : w.released) lane->release_piece();
      w.released.clear();
    }
    bool moved = false, wake = false;
    if (!failed) {
      try {
        for (Lane* lane : w.lanes) moved |= lane->send_step(kProgressBudget);
        for (Lane* lane : w.lanes) moved |= lane->recv_step(kProgressBudget);
      } catch (const Error& e) {
        failed = wake = true;
        std::lock_guard<std::mutex> lock(w.mutex);
        w.error = e;
      }
      std::lock_guard<std::mutex> lock(w.mutex);
      for (Lane* lane : w.lanes) {
        wake |= lane->take_finished() > 0;
        if (lane->piece_waiting()) w.pieces.emplace_back(lane, lane->take_piece());
      }
    }
    if (wake) write_eventfd(wake_fd_);
    if (moved) continue;
    fds.clear();
    fds.push_back(pollfd{w.event.fd(), POLLIN, 0});
    if (!failed) {
      for (Lane* lane : w.lanes) {
        if (short events = lane->poll_events()) fds.push_back(pollfd{lane->fd(), events, 0});
      }
    }
    int ready = ::poll(fds.data(), fds.size(), kWorkerSliceMs);
    if (ready > 0 && fds[0].revents != 0) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(w.event.fd(), &count, sizeof(count));
    }
  }
}

void MultiConnection::route_send(int lane, const SendSegment& s, std::vector<bool>& poked) {
  const int w = owner_[lane];
  if (w < 0) {
    lanes_[lane]->push_send(s);
    return;
  }
  std::lock_guard<std::mutex> lock(workers_[w]->mutex);
  workers_[w]->new_sends.emplace_back(lanes_[lane].get(), s);
  poked[w] = true;
}

void MultiConnection::route_recv(int lane, const RecvSegment& r, std::vector<bool>& poked) {
  const int w = owner_[lane];
  if (w < 0) {
    lanes_[lane]->push_recv(r);
    return;
  }
  std::lock_guard<std::mutex> lock(workers_[w]->mutex);
  workers_[w]->new_recvs.emplace_back(lanes_[lane].get(), r);
  poked[w] = true;
}

void MultiConnection::poke_all(const std::vector<bool>& poked) {
  for (size_t w = 0; w < poked.size(); ++w) {
    if (poked[w]) poke(*workers_[w]);
  }
}

void MultiConnection::post_send(SendRequest* request) {
  start_send("tcp", request, peer());
  const uint32_t sequence = send_sequence_++;
  OutMessage& m = sends_.emplace_back();
  m.request = request;
  m.header = FrameHeader{frame_magic(request->point_to_point), sequence, request->bytes};
  const ChunkLayout layout = chunk_layout(request->bytes, nsockets(), sequence);
  const bool whole = layout.count == 0;
  m.segments_left.store(1 + (whole ? (request->bytes > 0 ? 1 : 0) : layout.count),
                        std::memory_order_relaxed);
  std::vector<bool> poked(workers_.size(), false);
  lanes_[0]->push_send(
      SendSegment{&m, reinterpret_cast<const std::byte*>(&m.header), sizeof(FrameHeader), true});
  if (whole) {
    if (request->bytes > 0) {
      lanes_[0]->push_send(SendSegment{&m, request->data, request->bytes, false});
    }
  } else {
    for (size_t k = 0; k < layout.count; ++k) {
      route_send(layout.socket_of(k),
                 SendSegment{&m, request->data + layout.offset_of(k), layout.length_of(k), false},
                 poked);
    }
  }
  poke_all(poked);
}

void MultiConnection::post_recv(RecvRequest* request) {
  start_recv("tcp", request, peer());
  InMessage& m = recvs_.emplace_back();
  m.request = request;
  m.sequence = recv_sequence_++;
  m.direct = request->bytes > 0 ? request->sink->direct_destination() : nullptr;
  const ChunkLayout layout = chunk_layout(request->bytes, nsockets(), m.sequence);
  const bool whole = layout.count == 0;
  m.segments_left.store(1 + (whole ? (request->bytes > 0 ? 1 : 0) : layout.count),
                        std::memory_order_relaxed);
  std::vector<bool> poked(workers_.size(), false);
  lanes_[0]->push_recv(RecvSegment{&m, 0, sizeof(FrameHeader), true});
  if (whole) {
    if (request->bytes > 0) lanes_[0]->push_recv(RecvSegment{&m, 0, request->bytes, false});
  } else {
    for (size_t k = 0; k < layout.count; ++k) {
      route_recv(layout.socket_of(k),
                 RecvSegment{&m, layout.offset_of(k), layout.length_of(k), false}, poked);
    }
  }
  poke_all(poked);
}

bool MultiConnection::progress() {
  if (failed_) {
    if (!busy()) return false;
    throw error_;
  }
  bool moved = false;
  try {
    // Sends first: a ping-pong's reply leaves before we look for the next message. Socket 0
    // first: its headers let the other sockets' staged bytes through.
    for (Lane* lane : mine_) moved |= lane->send_step(kProgressBudget);
    for (Lane* lane : mine_) moved |= lane->recv_step(kProgressBudget);
  } catch (const Error& e) {
    if (failed_) throw;  // check_header failed the connection already
    fail(e);
  }
  if (!workers_.empty()) moved |= collect_workers();
  moved |= complete_sends();
  moved |= complete_recvs();
  return moved;
}

bool MultiConnection::collect_workers() {
  bool moved = false;
  std::vector<std::pair<Lane*, Piece>> pieces;
  for (auto& w : workers_) {
    std::optional<Error> error;
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      if (w->error) {
        error = w->error;
      } else {
        pieces.swap(w->pieces);
      }
    }
    if (error) fail(*error);
    if (pieces.empty()) continue;
    moved = true;
    for (auto& [lane, piece] : pieces) {
      piece.message->request->sink->consume(piece.data, piece.offset, piece.bytes);
    }
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      for (auto& [lane, piece] : pieces) w->released.push_back(lane);
    }
    pieces.clear();
    poke(*w);
  }
  return moved;
}

bool MultiConnection::complete_sends() {
  bool moved = false;
  while (!sends_.empty()) {
    OutMessage& m = sends_.front();
    if (m.segments_left.load(std::memory_order_acquire) != 0) {
      m.request->done_bytes = m.moved.load(std::memory_order_relaxed);
      break;
    }
    m.request->done_bytes = m.request->bytes;
    m.request->complete = true;
    sends_.pop_front();
    moved = true;
  }
  return moved;
}

bool MultiConnection::complete_recvs() {
  bool moved = false;
  while (!recvs_.empty()) {
    InMessage& m = recvs_.front();
    if (m.segments_left.load(std::memory_order_acquire) != 0) {
      m.request->done_bytes = m.moved.load(std::memory_order_relaxed);
      break;
    }
    m.request->done_bytes = m.request->bytes;
    m.request->complete = true;
    recvs_.pop_front();
    moved = true;
  }
  // A socket the peer closed while a segment waited on it: what came before is delivered, and
  // the message it waited for fails once it is the oldest.
  if (!recvs_.empty()) {
    for (const auto& lane : lanes_) {
      if (lane->eof_message() == &recvs_.front()) fail_closed(*lane);
    }
  }
  return moved;
}

void MultiConnection::check_header(InMessage& m) {
  const FrameHeader& h = m.header;
  if (h.magic == kNoticeMagic) {
    NoticeFrame frame;
    static_assert(sizeof(frame) == sizeof(h));
    std::memcpy(&frame, &h, sizeof(frame));
    if (frame.kind == kDeparted) fail_departed();
    fail_notice(frame);
  }
  if (!is_frame_magic(h.magic) || h.sequence != m.sequence) {
    fail(Error(cclInternalError,
               "tcp: corrupt stream from rank " + std::to_string(peer()) + " (" + peer_address_ +
                   "): bad frame header (magic " + std::to_string(h.magic) + ", sequence " +
                   std::to_string(h.sequence) + ", expected " + std::to_string(m.sequence) + ")",
               peer()));
  }
  if (h.bytes != m.request->bytes) {
    fail(Error(cclInternalError,
               "message size mismatch with rank " + std::to_string(peer()) + ": expected " +
                   std::to_string(m.request->bytes) + " bytes, peer sent " +
                   std::to_string(h.bytes),
               peer()));
  }
  m.header_ok.store(true, std::memory_order_release);
  // Helpers whose staging waits for this check look again now rather than at their next slice.
  if (m.direct == nullptr && m.request->bytes >= kSplitBytes) {
    for (auto& w : workers_) poke(*w);
  }
}

void MultiConnection::fail(const Error& error) {
  stop_workers();
  failed_ = true;
  error_ = error;
  CCL_WARN(kNet, "%s", error.what());
  throw error_;
}

void MultiConnection::fail_closed(const Lane& lane) {
  // The peer may have said why before it closed: a notice or goodbye at socket 0's boundary.
  if (lane.index() != 0 && lanes_[0]->recv_at_boundary()) {
    NoticeFrame frame{};
    if (peek_frame(&frame) == static_cast<ssize_t>(sizeof(frame)) && frame.magic == kNoticeMagic) {
      if (frame.kind == kDeparted) fail_departed();
      fail_notice(frame);
    }
  }
  fail(Error(
      cclRemoteError,
      "tcp: connection to rank " + std::to_string(peer()) + " (" + peer_address_ + ") closed" +
          (lane.index() != 0 ? " (socket " + std::to_string(lane.index()) + ")" : std::string()),
      peer()));
}

void MultiConnection::fail_departed() {
  fail(Error(cclRemoteError,
             "tcp: connection to rank " + std::to_string(peer()) + " (" + peer_address_ +
                 "): the peer destroyed its communicator while this rank still expects a message",
             peer()));
}

void MultiConnection::fail_notice(const NoticeFrame& frame) {
  const FailureNotice notice = notice_of(frame);
  notice_received_ = notice;
  try {
    throw_notice(notice, peer());
  } catch (const Error& e) {
    fail(e);
  }
}

void MultiConnection::send_at_boundary(const NoticeFrame& frame) {
  // As TcpConnection: only where the next bytes of socket 0's stream are a header.
  if (!lanes_[0]->send_at_boundary()) return;
  [[maybe_unused]] ssize_t n =
      ::send(lanes_[0]->fd(), &frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t MultiConnection::peek_frame(NoticeFrame* frame) {
  ssize_t n;
  do {
    n = ::recv(lanes_[0]->fd(), frame, sizeof(*frame), MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n;
}

bool MultiConnection::incoming() {
  if (!recvs_.empty()) return false;
  if (failed_) return true;  // a receive from this peer reports its failure
  NoticeFrame frame{};
  const ssize_t n = peek_frame(&frame);
  return message_waiting(n, errno, frame);
}

void MultiConnection::send_notice(const FailureNotice& notice) {
  if (notice_sent_) return;
  notice_sent_ = true;
  stop_workers();
  send_at_boundary(frame_of(notice));
  for (const auto& lane : lanes_) ::shutdown(lane->fd(), SHUT_WR);
}

bool MultiConnection::idle_peer_gone(bool abort_fails) {
  NoticeFrame frame{};
  const ssize_t n = peek_frame(&frame);
  const IdlePeek peek = classify_idle_peek(n, errno, frame, abort_fails);
  if (peek != IdlePeek::kNotice) return peek == IdlePeek::kGone;
  fail_notice(frame);
}

std::optional<FailureNotice> MultiConnection::peek_notice() {
  if (notice_received_) return notice_received_;
  if (!lanes_[0]->recv_at_boundary()) return std::nullopt;
  NoticeFrame frame{};
  if (peek_frame(&frame) != static_cast<ssize_t>(sizeof(frame)) || frame.magic != kNoticeMagic ||
      frame.kind == kDeparted) {
    return std::nullopt;
  }
  return notice_of(frame);
}

void MultiConnection::append_polls(std::vector<pollfd>& fds) const {
  if (!busy()) {
    // An idle peer matters only if it fails: its notice (or a crash) ends the wait. Socket 0
    // first (after_poll relies on it); once a helper socket hung up, socket 0 alone.
    for (const auto& lane : lanes_) {
      fds.push_back(pollfd{lane->fd(), POLLRDHUP, 0});
      if (idle_control_only_) break;
    }
    return;
  }
  // Sockets without work are left out: a hang-up there would wake every poll. The helpers'
  // sockets are theirs to poll; they wake the caller through the transport's eventfd.
  for (const Lane* lane : mine_) {
    if (short events = lane->poll_events()) fds.push_back(pollfd{lane->fd(), events, 0});
  }
}

void MultiConnection::after_poll(const pollfd* fds, size_t count) {
  bool hangup = false;
  bool hangup0 = false;  // idle: fds[0] is socket 0 (append_polls)
  for (size_t i = 0; i < count; ++i) {
    const bool h = (fds[i].revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) != 0;
    hangup |= h;
    if (i == 0) hangup0 = h;
  }
  if (!hangup) return;
  if (busy()) {
    progress();  // drains what arrived, throws if the peer is gone
  } else {
    // A failure notice throws; an abort, a goodbye or a crash of a peer this operation does not
    // need is left to the operation that needs it (and to check_health).
    const bool gone = idle_peer_gone(/*abort_fails=*/false);
    if (hangup0 || gone) {
      set_idle_closed();
    } else {
      // A helper socket hung up, socket 0 did not: a notice may still come there.
      idle_control_only_ = true;
    }
  }
}

}  // namespace ccl::transport::tcp
