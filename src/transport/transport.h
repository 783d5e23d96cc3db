// The transport interface (DESIGN.md principle 2): a Transport is one kind of medium (shm, tcp,
// loopback, later ucx/ib/cuda) serving one communicator; it owns one Connection per peer it was
// asked to connect. A Connection moves whole messages in both directions, non-blocking:
//   post_send / post_recv queue a request; progress() advances them; Transport::wait() sleeps
//   until some connection may progress. The executor never knows which transport it drives.
//
// Ordering: messages between one pair of ranks, in one direction, match in the order posted.
// Each message's byte count is known to both sides (it comes from the schedule); a transport may
// check it and throw InternalError("message size mismatch...") when the peer disagrees.
//
// Errors: every call may throw ccl::Error; a dead or disconnected peer is RemoteError naming the
// peer's rank (Error::culprit). Nothing here blocks beyond the timeout passed to wait().
//
// Failure propagation: a rank whose operation fails cannot take part in the rest of it, so the
// peers waiting for it (directly or through others) would wait until their timeout. Instead the
// communicator calls notify_failure() on every transport, which tells every connected peer; a
// peer's wait() or progress() then throws the notice as its own error (failure_notice.h). So a
// death seen by one rank reaches all of them within a wake-up, naming the same culprit. An abort
// notice, and a goodbye (a destroyed communicator), fail only a wait that needs that peer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/deadline.h"
#include "base/memory_kind.h"

namespace ccl {
class Store;
}

namespace ccl::transport {

// Pieces handed to a RecvSink start at offsets that are multiples of kPieceAlign, and have
// lengths that are multiples of it except the message's last piece. So a sink that reduces
// elements (at most 8 bytes) never sees an element split across pieces.
inline constexpr size_t kPieceAlign = 64;

// Where received bytes go. The executor supplies one per receive: plain copy, or reduce-into.
class RecvSink {
 public:
  virtual ~RecvSink() = default;
  // Consume `len` bytes that belong at byte `offset` of the message.
  virtual void consume(const std::byte* piece, size_t offset, size_t len) = 0;
  // If the message may be written straight to memory, the address of its byte 0, else nullptr.
  // A transport that receives into its own buffers (tcp) uses this to skip a copy.
  virtual std::byte* direct_destination() { return nullptr; }
};

struct RegisteredRegion;

struct SendRequest {
  const std::byte* data = nullptr;
  size_t bytes = 0;
  // The registration covering [data, data + bytes) when the call's buffer has one (the
  // communicator's registration cache), else nullptr: a transport that moves only registered
  // memory (ib) takes its key from it, one that lets the peer read the sender's memory offers it.
  const RegisteredRegion* region = nullptr;
  // A point-to-point message (cclSend): the transport marks it on the wire, so that a receive
  // from any source (Connection::incoming) takes only such messages, never a collective's.
  bool point_to_point = false;
  // Owned by the transport while posted:
  size_t done_bytes = 0;
  bool complete = false;  // set by progress(); the buffer may then be reused
};

struct RecvRequest {
  size_t bytes = 0;
  RecvSink* sink = nullptr;
  // The registration covering the sink's direct destination, when it has one (as SendRequest).
  const RegisteredRegion* region = nullptr;
  // Owned by the transport while posted:
  size_t done_bytes = 0;
  bool complete = false;  // set by progress() after the last sink->consume()
};

class Connection {
 public:
  virtual ~Connection() = default;
  int peer() const { return peer_; }

  // The request objects stay valid (and untouched by the caller) until they are complete.
  virtual void post_send(SendRequest* request) = 0;
  virtual void post_recv(RecvRequest* request) = 0;
  // Advances posted requests without blocking. Returns true if any byte moved.
  virtual bool progress() = 0;
  // True if requests are posted and not complete.
  virtual bool busy() const = 0;

  // A receive from any source (Executor::probe_any) asks every peer's connection, without
  // blocking, whether that peer's next message, which no receive posted here has claimed yet, is
  // a point-to-point one (SendRequest::point_to_point) that has begun to arrive: its first slot,
  // frame header, chunk or announcement is in (or the peer failed, so that a receive from it
  // reports the failure). A collective's message is never reported: the peer sent it for an
  // operation this rank has yet to run. False while receives are posted. A transport that
  // cannot tell (ib: a sender writes only once the receiver has asked) keeps can_probe() false,
  // and the receive is refused.
  virtual bool can_probe() const { return false; }
  virtual bool incoming() { return false; }

 protected:
  explicit Connection(int peer) : peer_(peer) {}

 private:
  int peer_;
};

// What a transport needs to know about the communicator while it sets up connections.
struct PeerInfo {
  int rank = -1;
  std::string host_id;  // ranks with equal host ids share memory (hostname+boot id, or CCL_HOSTID)
  int pid = 0;
};

struct SetupContext {
  int rank = 0;
  int nranks = 1;
  std::string comm_tag;         // unique per communicator: prefix for store keys and names
  Store* store = nullptr;       // rendezvous for exchanging connection details
  std::vector<PeerInfo> peers;  // indexed by rank
  Deadline deadline = Deadline::never();
  const AbortFlag* abort = nullptr;  // set by cclCommAbort
};

class SharedWindow;
struct FailureNotice;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;

  // The shared window over every rank of the communicator, when this transport connected all of
  // them and its medium is shared memory (shared_window.h); else nullptr. Valid after connect().
  virtual SharedWindow* shared_window() { return nullptr; }

  // Collective over the ranks in `peers` (each listed rank calls it with this rank listed):
  // creates one connection per listed peer, exchanging details through ctx.store. The transport
  // owns the connections (they live as long as it does); the result is in the order of `peers`.
  virtual std::vector<Connection*> connect(const SetupContext& ctx, std::span<const int> peers) = 0;

  // Sleeps up to `timeout` or until a connection of this transport may progress (data arrived,
  // space freed, peer gone). May return early, spuriously. Throws RemoteError for a dead peer
  // that still has work pending on one of this transport's connections.
  virtual void wait(std::chrono::microseconds timeout) = 0;

  // Wakes a thread blocked in wait() (used by abort). Safe from any thread.
  virtual void interrupt() = 0;

  // Whether data of sends this transport already reported complete may still sit in its own
  // buffers, leaving only while the transport is progressed (UCX: a send completes once UCX holds
  // the data; its tcp lane writes the rest as the socket drains, inside ucp_worker_progress). A
  // rank that sleeps in other transports then gives this one turns with progress_idle(), else a
  // peer waits for bytes that never leave while this rank waits for that peer. Neither throws.
  virtual bool needs_idle_progress() { return false; }
  virtual void progress_idle() {}

  // Every rank of the communicator has connected (a barrier passed): a transport that listens for
  // connections may stop.
  virtual void setup_done() {}

  // Tells every connected peer that this rank's communicator failed; best effort, never blocks.
  // The connections are unusable afterwards. Not thread-safe against a running operation: the
  // communicator calls it from the thread whose operation failed, or when none runs.
  virtual void notify_failure(const FailureNotice& notice) = 0;

  // Without blocking: the failure notices peers have posted so far, as (peer, notice), where this
  // transport can see them (a tcp notice behind unread data is not seen). Used to find, after a
  // timeout, the rank everyone waits for (Communicator::resolve_timeout).
  virtual void collect_notices(std::vector<std::pair<int, FailureNotice>>& out) = 0;

  // Without blocking: throws the error of a peer that failed (its notice) or vanished while the
  // communicator is idle. Not thread-safe against a running operation (as notify_failure).
  virtual void check_health() = 0;

  // The kinds of memory this transport's connections can read and write (base/memory_kind.h):
  // a call whose buffer is of a kind some transport it uses cannot move is refused before
  // anything is sent. Host memory by default; the CUDA transport adds device memory.
  virtual bool moves(MemoryKind kind) const { return is_host_memory(kind); }

  // Registration (registered_region.h): adds this transport's key for `region` (pinning it where
  // the medium needs it: an InfiniBand MR, a UCX memory handle), or nothing where it needs none
  // (tcp). The communicator's registration cache calls it once per region and
  // deregister_memory() once its last user lets go. Either may run while an operation runs on
  // another thread: neither may touch the connections.
  virtual void register_memory(RegisteredRegion& /*region*/) {}
  virtual void deregister_memory(const RegisteredRegion& /*region*/) {}
};

}  // namespace ccl::transport
