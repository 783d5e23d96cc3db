// One socket of a multi-socket pair (tcp_multi_connection.h): two queues of byte segments, one
// per direction, moved without blocking by whichever thread drives the lane (the caller's, or one
// helper thread). A segment is a frame header (socket 0 only), a whole small payload or a chunk
// (tcp_chunks.h); the peer's lane expects the same segments in the same order.
//
// Received payload goes straight to the message's direct destination when it has one, else
// through the lane's staging buffer, handed on in kPieceAlign pieces at the chunk's offsets once
// the message's header has been checked (nothing of a mismatched message reaches a sink). A lane
// driven by a helper thread publishes each piece instead (piece()), stops reading until the
// caller has consumed it and called release_piece(): sinks run on the caller's thread only.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/bootstrap/socket.h"
#include "transport/tcp/tcp_io.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace ccl::transport::tcp {

// A posted message as its lanes see it. Counters are atomic: helper threads finish segments.
struct OutMessage {
  SendRequest* request = nullptr;
  FrameHeader header{};
  std::atomic<size_t> segments_left{0};
  std::atomic<size_t> moved{0};  // payload bytes in the kernel
};

struct InMessage {
  RecvRequest* request = nullptr;
  uint32_t sequence = 0;
  std::byte* direct = nullptr;  // the sink's direct destination, if it has one
  FrameHeader header{};         // as received on socket 0
  std::atomic<bool> header_ok{false};
  std::atomic<size_t> segments_left{0};
  std::atomic<size_t> moved{0};  // payload bytes in the destination or handed to the sink
};

struct SendSegment {
  OutMessage* message;
  const std::byte* data;
  size_t bytes;
  bool header;  // the frame header (not counted as payload)
};

struct RecvSegment {
  InMessage* message;
  size_t offset;  // in the message's payload; unused for the header
  size_t bytes;
  bool header;
};

struct Piece {
  InMessage* message = nullptr;
  const std::byte* data = nullptr;
  size_t offset = 0;
  size_t bytes = 0;
};

class Lane {
 public:
  // `on_header` runs (on the driving thread) when a header segment is complete; it checks the
  // header and throws if it is wrong. `publish` lanes hand staged pieces over (helper threads).
  Lane(int index, Socket socket, int peer, const std::string& address, bool publish,
       std::function<void(InMessage&)> on_header);

  int index() const { return index_; }
  int fd() const { return socket_.fd(); }

  void push_send(const SendSegment& s) { sends_.push_back(s); }
  void push_recv(const RecvSegment& r) { recvs_.push_back(r); }

  // Moves bytes without blocking, at most `budget` per call. True if any byte moved. Throws the
  // socket's error; an end of stream is not thrown but noted (eof_message()).
  bool send_step(size_t budget);
  bool recv_step(size_t budget);

  // What poll() should wait for on this lane (0: nothing to do, or stalled).
  short poll_events() const;
  bool has_work() const { return !sends_.empty() || !recvs_.empty(); }
  // Segments finished since the last call (a helper thread wakes the caller for them).
  size_t take_finished() { return std::exchange(finished_, 0); }

  // The next bytes of our stream are a frame header (or nothing is queued).
  bool send_at_boundary() const;
  // The next bytes the peer sends are a frame header (nothing of a message half read).
  bool recv_at_boundary() const;

  // After the peer closed its end: the message whose segment was waiting (it cannot complete).
  const InMessage* eof_message() const { return eof_message_.load(std::memory_order_acquire); }

  // Publishing lanes: the piece waiting for the caller, once; nullptr data if none.
  bool piece_waiting() const { return piece_out_ && !piece_taken_; }
  Piece take_piece() {
    piece_taken_ = true;
    return piece_;
  }
  void release_piece();

  static constexpr size_t kStagingBytes = 256 * 1024;

 private:
  void ensure_staging();
  // Hands staged bytes of the front segment on (or publishes them); true if it is finished.
  bool settle_staged();
  void finish_recv_segment();
  [[noreturn]] void fail_errno(const char* what, int err);

  int index_;
  Socket socket_;
  int peer_;
  std::string address_;
  bool publish_;
  std::function<void(InMessage&)> on_header_;

  std::deque<SendSegment> sends_;
  size_t sent_ = 0;  // bytes of the front send segment in the kernel

  std::deque<RecvSegment> recvs_;
  size_t received_ = 0;   // bytes of the front receive segment read from the socket
  size_t delivered_ = 0;  // of those, handed to the sink (staged segments)
  StagingBuffer staging_;
  bool piece_out_ = false;  // a published piece is not released yet
  bool piece_taken_ = false;
  Piece piece_;
  size_t finished_ = 0;
  std::atomic<const InMessage*> eof_message_{nullptr};
};

}  // namespace ccl::transport::tcp
