// One peer over several sockets (CCL_SOCKET_NTHREADS x CCL_NSOCKS_PERTHREAD > 1); with one the
// transport uses TcpConnection, unchanged.
//
// Wire: socket 0 is the control path. It carries every message's 16-byte frame header in posting
// order, the whole payload of messages under kSplitBytes right behind it, failure notices and the
// goodbye. A larger message's payload is cut into chunks spread over all the sockets
// (tcp_chunks.h); both sides derive the layout from the size and sequence number, so each
// socket's stream holds its chunks in message order with no framing of its own. Every segment of
// every message is queued on its socket when the request is posted (trusting the posted size,
// which the header then checks), so that nothing of an unposted message is read; a message
// completes when all its segments have, and completions are reported in posting order.
//
// Threads: with CCL_SOCKET_NTHREADS = 1 the caller's progress() drives every socket without
// blocking. With more, sockets 1..N-1 belong to min(NTHREADS, N-1) helper threads per peer
// (socket s to thread (s-1) % threads), each poll-driven over its sockets; the caller keeps
// socket 0 (headers, small messages, its share of chunks), consumes the pieces the helpers
// staged for a consume() sink, and collects completions. Helpers wake the caller's wait()
// through the transport's eventfd.
//
// Measured end to end on loopback: CCL_SHM_DISABLE=1 cclrun -np 2 all_reduce_perf -b 64K -e 256M
// -f 4, out-of-place busbw in GB/s at 1 MiB / 16 MiB / 256 MiB, on 2 cores under a load average
// of about 9 (other builds): 1x1 1.00 / 0.55 / 0.92, 1x4 0.47 / 0.50 / 0.64, 2x2 1.14 / 0.97 /
// 0.62; every result exact. The differences are within the run-to-run noise of that machine:
// nothing here shows sockets or threads paying on 2 cores, which is why one socket stays the
// default. Transfer figures: tcp_transport.h.
//
// Failures: an end of stream on a socket fails the message whose segment waited there, once it
// is the oldest (what was sent before a close is still delivered); a reset or error fails at
// once. Both are RemoteError naming the peer; a notice or goodbye the peer left on socket 0 is
// reported instead where it can be seen. After any failure, a notice or destruction the helper
// threads are stopped and joined, so that nothing touches a request's memory any more.
#pragma once

#include <poll.h>

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "core/bootstrap/socket.h"
#include "transport/failure_notice.h"
#include "transport/tcp/tcp_lane.h"
#include "transport/transport.h"

namespace ccl::transport::tcp {

class MultiConnection final : public Connection {
 public:
  // `sockets` are connected, in index order (at least 2). `wake_fd` is the transport's eventfd,
  // which helper threads write when the caller has something to collect.
  MultiConnection(int peer, std::vector<Socket> sockets, std::string peer_address, int nthreads,
                  int wake_fd);
  ~MultiConnection() override;

  void post_send(SendRequest* request) override;
  void post_recv(RecvRequest* request) override;
  bool progress() override;
  bool busy() const override { return !sends_.empty() || !recvs_.empty(); }
  bool can_probe() const override { return true; }
  bool incoming() override;  // peeks at the next frame header (socket 0's with several)

  int nsockets() const { return static_cast<int>(lanes_.size()); }
  int nworkers() const { return static_cast<int>(workers_.size()); }
  int control_fd() const { return lanes_[0]->fd(); }
  int lane_fd(int i) const { return lanes_[static_cast<size_t>(i)]->fd(); }  // for tests

  // For Transport::wait(): appends what to poll (busy: the caller's sockets with work; idle:
  // every socket for a hang-up), then reacts to what poll() saw on those entries.
  void append_polls(std::vector<pollfd>& fds) const;
  void after_poll(const pollfd* fds, size_t count);
  bool failed() const { return failed_; }

  // As TcpConnection's (failure propagation), on socket 0; every socket's direction is closed.
  void send_notice(const FailureNotice& notice);
  bool idle_peer_gone(bool abort_fails = true);
  std::optional<FailureNotice> peek_notice();
  bool watch_idle() const { return !idle_closed_ && !notice_sent_; }
  void set_idle_closed() { idle_closed_ = true; }

  static constexpr size_t kProgressBudget = 4 * 1024 * 1024;  // per socket and direction

 private:
  struct Worker {
    std::mutex mutex;  // guards everything below but `lanes` and `thread`
    std::vector<std::pair<Lane*, SendSegment>> new_sends;
    std::vector<std::pair<Lane*, RecvSegment>> new_recvs;
    std::vector<Lane*> released;                  // pieces the caller consumed
    std::vector<std::pair<Lane*, Piece>> pieces;  // staged pieces for the caller
    std::optional<Error> error;                   // a socket's, thrown by the caller
    bool stop = false;
    Socket event;  // eventfd: work, releases, stop
    std::vector<Lane*> lanes;
    std::thread thread;
  };

  void run_worker(Worker& w);
  static void poke(const Worker& w);
  void stop_workers();
  // Queues segments on their lanes: the caller's directly, the helpers' through their inboxes.
  void route_send(int lane, const SendSegment& s, std::vector<bool>& poked);
  void route_recv(int lane, const RecvSegment& r, std::vector<bool>& poked);
  void poke_all(const std::vector<bool>& poked);
  bool collect_workers();
  bool complete_sends();
  bool complete_recvs();
  void check_header(InMessage& m);
  [[noreturn]] void fail(const Error& error);
  [[noreturn]] void fail_closed(const Lane& lane);
  [[noreturn]] void fail_notice(const NoticeFrame& frame);
  [[noreturn]] void fail_departed();
  void send_at_boundary(const NoticeFrame& frame);
  ssize_t peek_frame(NoticeFrame* frame);

  std::string peer_address_;
  int wake_fd_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<int> owner_;   // per lane: the worker driving it, or -1 (the caller)
  std::vector<Lane*> mine_;  // the lanes the caller drives, socket 0 first
  std::vector<std::unique_ptr<Worker>> workers_;
  bool workers_stopped_ = false;

  std::deque<OutMessage> sends_;  // deque: elements stay put while helpers point at them
  uint32_t send_sequence_ = 0;
  std::deque<InMessage> recvs_;
  uint32_t recv_sequence_ = 0;

  bool failed_ = false;
  Error error_{cclSuccess, ""};
  bool notice_sent_ = false;
  std::optional<FailureNotice> notice_received_;
  bool idle_closed_ = false;
  bool idle_control_only_ = false;  // idle: a helper socket hung up; only socket 0 is watched
};

}  // namespace ccl::transport::tcp
