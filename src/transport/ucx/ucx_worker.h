// One UCP context and its one worker: what a ucx transport (one communicator) runs on.
//
// Features TAG (messages), RMA (puts into registered receive buffers) and WAKEUP (wait() sleeps
// on the worker's event fd). The worker is UCS_THREAD_MODE_SERIALIZED: the communicator drives a
// transport from one thread at a time, not always the same one (an async init thread connects,
// the caller's thread runs operations); interrupt() never touches UCX. The context is shared
// with register_memory(), which may run on another thread while an operation runs, so it is made
// with mt_workers_shared (UCP then locks ucp_mem_map against the worker's registration cache).
//
// Peer failure detection: a killed peer's tcp socket closes, and its endpoint fails at the next
// progress (measured here: the pending receive throws within a few ms of the SIGKILL). A peer
// whose host dies, or whose RDMA (rc, dc) endpoint just stops answering, gives no such signal;
// UCX finds it by keepalive every UCX_KEEPALIVE_INTERVAL, 20 s by default in 1.13. Unless the
// user set it, the context uses kKeepaliveInterval, so that such a peer is found within a second.
//
// Speed: unless the user set UCX_TCP_TX_SEG_SIZE / UCX_TCP_RX_SEG_SIZE, UCX's tcp uses segments of
// kTcpSegmentSize (the measurements are in ucx_worker.cc).
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "transport/ucx/ucx_request.h"

namespace ccl::transport::ucx {

// Whether UCX may open its tcp transport under these UCX_TLS and UCX_NET_DEVICES values (null:
// unset): UCX_TLS unset, naming tcp or all, or excluding (^) a list without tcp; and
// UCX_NET_DEVICES unset (a user who names devices tunes UCX himself).
bool ucx_tcp_may_run(const char* tls, const char* net_devices);

class UcxWorker {
 public:
  static constexpr const char* kKeepaliveInterval = "250ms";
  static constexpr const char* kTcpSegmentSize = "512k";

  // Throws SystemError naming what UCX said (an unusable UCX_TLS, no transport at all).
  // `estimated_peers` sizes UCX's tables.
  explicit UcxWorker(int estimated_peers);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  // This worker's address, which peers need to create endpoints to it.
  const std::vector<uint8_t>& address() const { return address_; }

  // ucp_worker_progress until it reports nothing more (bounded, never blocks); true if anything
  // happened.
  bool progress();
  // ucp_worker_arm: true when armed (the event fd will wake a poll), false when events are
  // pending (progress first). Throws SystemError for anything else.
  bool arm();
  // ucp_worker_arm's status, for a caller that may not throw (a destructor).
  ucs_status_t try_arm() noexcept;
  int event_fd() const { return event_fd_; }

  // Settling what was sent (Transport::needs_idle_progress): every ucp send is noted; settle()
  // progresses and keeps a worker flush posted over the sends so far; settled() once one that
  // covers every noted send completed (or failed: the endpoint's error surfaces elsewhere).
  void note_sent() { ++sent_; }
  bool settled() const { return flushed_ == sent_ && !flush_.active(); }
  void settle() noexcept;

  // Destroys the worker (every endpoint and request with it), keeping the context for the memory
  // handles that still need it. Idempotent; the destructor does the rest.
  void destroy_worker();

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> address_;
  int event_fd_ = -1;          // owned by the worker
  uint64_t sent_ = 0;          // sends noted
  uint64_t flushed_ = 0;       // of which a completed flush covered this many
  uint64_t flush_covers_ = 0;  // what the posted flush covers
  PendingOp flush_;
};

// "UCX: <what>: <ucs_status_string>", for errors.
std::string ucx_status_text(const char* what, ucs_status_t status);

}  // namespace ccl::transport::ucx
