// One peer's socket: framed messages in both directions, advanced without blocking.
//
// Sends are gathered with sendmsg (header + payload, several queued messages per call) and are
// complete once all their bytes are in the kernel. Receives read exactly one message at a time,
// header and payload in one readv, so nothing of a later message is taken from the kernel before
// a receive is posted for it. The payload goes straight to sink->direct_destination() when the
// sink offers one, else through a staging buffer handed to sink->consume() in kPieceAlign pieces.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "ccl/ccl.h"
#include "core/bootstrap/socket.h"
#include "transport/failure_notice.h"
#include "transport/tcp/tcp_io.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace ccl::transport::tcp {

class TcpConnection final : public Connection {
 public:
  // `socket` is connected; made non-blocking with TCP_NODELAY here. `peer_address` is for errors.
  TcpConnection(int peer, Socket socket, std::string peer_address);
  ~TcpConnection() override;

  void post_send(SendRequest* request) override;
  void post_recv(RecvRequest* request) override;
  bool progress() override;
  bool busy() const override { return !sends_.empty() || !recvs_.empty(); }
  bool can_probe() const override { return true; }
  bool incoming() override;  // peeks at the next frame header (socket 0's with several)

  // For Transport::wait(): the socket and what to poll it for while busy.
  int fd() const { return socket_.fd(); }
  short poll_events() const;
  // True once the connection has thrown; it throws the same error on every later progress().
  bool failed() const { return failed_; }

  // Failure propagation (transport.h): sends `notice` if no message is half sent (else the
  // peer learns from the closed stream), then closes our direction. Never blocks.
  void send_notice(const FailureNotice& notice);
  // For a connection with nothing posted: what the peer's closing or waiting bytes mean. Throws
  // the peer's failure notice; returns true if the peer is gone without a goodbye (a crash),
  // false if it left cleanly, or nothing is known (data of a later message is waiting). With
  // `abort_fails` false a peer's abort notice is left unread, as a goodbye: a wait inside an
  // operation that does not need this peer must not fail for it (failure_notice.h).
  bool idle_peer_gone(bool abort_fails = true);
  // The peer's failure notice if it has been read, or can be seen without consuming anything
  // (nothing half read); else nothing.
  std::optional<FailureNotice> peek_notice();
  // An idle connection whose peer closed is polled no more (its hang-up would wake every poll).
  bool watch_idle() const { return !idle_closed_ && !notice_sent_; }
  void set_idle_closed() { idle_closed_ = true; }

  static constexpr size_t kStagingBytes = 256 * 1024;
  // Bytes moved per direction per progress() call, so one busy peer cannot starve the others.
  static constexpr size_t kProgressBudget = 4 * 1024 * 1024;

 private:
  struct PendingSend {
    SendRequest* request;
    FrameHeader header;
    size_t sent;  // header and payload bytes handed to the kernel
  };

  bool progress_sends();
  bool progress_recvs();
  void check_header(const RecvRequest& request);
  // Hands the staged bytes that keep pieces kPieceAlign-aligned to the sink.
  void deliver_staged(RecvRequest& request);
  void finish_recv(RecvRequest& request);
  [[noreturn]] void fail(cclResult_t code, const std::string& message);
  [[noreturn]] void fail(const Error& error);
  // A NoticeFrame read in place of a frame header: the peer's notice, thrown as our error.
  [[noreturn]] void fail_notice(const NoticeFrame& frame);
  // Sends `frame` unless a message is half sent (never blocks).
  void send_at_boundary(const NoticeFrame& frame);
  // recv(MSG_PEEK) of the next 16 bytes, consuming nothing; the byte count or -1 (errno set).
  ssize_t peek_frame(NoticeFrame* frame);
  [[noreturn]] void fail_closed();
  [[noreturn]] void fail_errno(const char* what, int err);

  Socket socket_;
  std::string peer_address_;

  std::deque<PendingSend> sends_;
  uint32_t send_sequence_ = 0;

  std::deque<RecvRequest*> recvs_;
  uint32_t recv_sequence_ = 0;
  // The message being received (the front of recvs_).
  bool in_started_ = false;
  FrameHeader in_header_{};
  size_t in_header_got_ = 0;
  std::byte* in_direct_ = nullptr;  // the sink's direct destination, if it has one
  StagingBuffer staging_;           // allocated at the first sink receive
  size_t staged_ = 0;  // payload bytes in staging_, at message offset request->done_bytes

  bool failed_ = false;
  Error error_{cclSuccess, ""};  // what progress() rethrows once failed_
  bool notice_sent_ = false;     // our direction is closed
  std::optional<FailureNotice> notice_received_;
  bool idle_closed_ = false;
};

}  // namespace ccl::transport::tcp
