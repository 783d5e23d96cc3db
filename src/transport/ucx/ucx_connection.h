// One peer of a ucx transport: an endpoint (UCP_ERR_HANDLING_MODE_PEER) on the communicator's
// worker, and the messages posted to and from that peer.
//
// Messages are cut into chunks (ucx_chunking.h), each one tagged message (ucx_wire.h) whose tag
// names sender, sequence and chunk, so that messages match in posting order and never across
// peers. A receive posts its chunk receives into the sink's direct destination (at most
// kDirectWindow chunks in flight per peer), or into kStagingBuffers staging buffers whose chunks
// go to sink->consume() in order, so that a staged receive holds at most two chunks.
//
// RMA (where UcxOptions::rma allows it for the endpoint): a send of at least kRmaMinBytes whose
// buffer is registered (SendRequest.region has a "ucx" key) sends a kReadyToSend control message
// instead of its chunks and waits. The receiver answers once the receive is posted: kOffer with its
// destination and packed rkey when that destination is registered too (RecvRequest.region), kGo
// otherwise. On an offer the sender ucp_put_nbx's the whole message, flushes the endpoint (tags and
// RMA are not ordered on one endpoint, and a put's completion is only local) and sends chunk 0
// flagged rma_done, without data. A receive that could be offered posts only chunk 0 until it knows
// which way the sender went, so an unregistered sender's data still lands. The handshake costs a
// round trip only when the sender is registered and the receiver is not; the receiver checks the
// sender's size in the kReadyToSend.
//
// Failures: an endpoint error (the peer died: a socket closed, a keepalive missed) fails a
// connection with requests pending, as a RemoteError naming the peer; so does a kFailed notice
// (notice channel). An abort notice, or the goodbye of a peer that destroyed its communicator,
// fails it only for a request that peer will never serve (a send to it, or a receive of a message
// it had not completed: NoticeWire::sent), so that data the notice overtook is still delivered.
// A connection that failed throws the same error from every later progress() while it is busy,
// cancels its chunk receives and closes its endpoint by force (at once where the peer is gone or
// failed, else once this rank's own notice to it has left), so that UCX drops its requests.
// Caveat: until that close, and for an operation UCX had already handed to a NIC (an RDMA put or
// rendezvous read in flight), a caller's buffer may still be read or written after the error;
// only the worker's destruction (the transport's) guarantees that nothing touches it.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "base/error.h"
#include "transport/failure_notice.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_request.h"
#include "transport/ucx/ucx_rkey_cache.h"
#include "transport/ucx/ucx_wire.h"
#include "transport/ucx/ucx_worker.h"

namespace ccl::transport::ucx {

// The smallest message that takes the RMA handshake. It adds a round trip and a flush to a
// message that UCX's rendezvous would move zero-copy anyway, so it pays only where that is small
// against the transfer; 64 KiB is a choice, not measured on RDMA (this host has none; over its
// emulated RMA the handshake never pays, see ucx_options.h).
inline constexpr size_t kRmaMinBytes = 64 * 1024;
inline constexpr size_t kDirectWindow = 16;   // chunk receives in flight into destinations
inline constexpr size_t kSendWindow = 16;     // chunk sends in flight per peer
inline constexpr size_t kStagingBuffers = 2;  // staging buffers of one chunk per peer
// ucp_worker_progress rounds (UcxWorker::progress) that take what UCX holds after an endpoint
// error, before the error fails the connection.
inline constexpr int kDrainProgressCalls = 16;
// How far beyond the next receive a kReadyToSend may announce a message (messages the sender
// posted and the receiver has not): further is a protocol error, which bounds the announcements
// kept.
inline constexpr uint64_t kMaxMessagesAhead = 1u << 16;

// What a connection has done, for tests and logs.
struct ConnectionStats {
  size_t tagged_messages = 0;  // sent by chunks
  size_t rma_messages = 0;     // sent by ucp_put_nbx
  size_t offers_sent = 0;
  size_t go_sent = 0;
  size_t staged_chunks = 0;  // received through a staging buffer
};

class UcxConnection final : public Connection {
 public:
  UcxConnection(int peer, int self, UcxWorker& worker);
  ~UcxConnection() override;  // after the teardown below: frees memory only

  // Setup (ucx_setup.h): the endpoint, made with on_endpoint_error and this as its argument.
  void attach(ucp_ep_h ep) { ep_ = ep; }
  ucp_ep_h endpoint() const { return ep_; }
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  // The hello exchange (ucx_setup.h): sends ours and posts the receive of the peer's.
  void start_hello(int nranks, uint64_t tag_hash);
  // True once both are done; throws RemoteError for a hello that is not the peer's.
  bool hello_done(int nranks, uint64_t tag_hash);
  // Posts the receives of the peer's control messages and failure notice. `rma`: registered
  // sends take the RMA handshake (UcxOptions::rma decided it for this endpoint).
  void start(bool rma);

  void post_send(SendRequest* request) override;
  void post_recv(RecvRequest* request) override;
  // Progresses the worker, then advance().
  bool progress() override;
  bool busy() const override { return !sends_.empty() || !recvs_.empty(); }
  bool can_probe() const override { return true; }
  // Progresses the worker, then looks for the next message's announcement (kReadyToSend) or its
  // chunk 0 in UCX's unexpected queue (ucp_tag_probe_nb, which takes nothing).
  bool incoming() override;

  // Advances this peer's requests after the worker was progressed. Throws the connection's
  // error while busy.
  bool advance();

  // Failure propagation (transport.h).
  bool failed() const { return failed_; }
  bool endpoint_failed() const { return endpoint_status_ != UCS_OK; }
  ucs_status_t endpoint_status() const { return endpoint_status_; }
  // Sends `notice` (or a goodbye: kind kDeparted) once, without waiting.
  void send_notice(const NoticeWire& notice);
  // Looks for the peer's notice without throwing; true once one was received.
  bool poll_notice();
  // The peer's failure notice (not a goodbye), if one was received.
  std::optional<FailureNotice> failure_notice() const;
  bool departed() const { return notice_in_ && notice_in_->kind == kDeparted; }
  // Throws the peer's failure notice as this connection's error.
  [[noreturn]] void fail_with_notice();
  // A kFailed notice ends every wait once (transport.h); true if it is still to be thrown.
  bool take_unreported_failure();
  // A failed connection's forced close, once it may happen (see Failures above); never throws.
  void close_after_failure();

  // Teardown, in this order, by the transport: cancel receives but the notice's, say goodbye and
  // flush the endpoint (ucp_ep_flush_nbx); wait (bounded) until both are done and the peer's
  // goodbye is in (shutdown_flushed()), so that no message of the peer's is left unreceived;
  // close the endpoint by force; cancel the notice receive, release every request handle and
  // remote key; then the worker goes, then this object.
  //
  // By force, because UCX 1.13's flushing close of a UCP_ERR_HANDLING_MODE_PEER endpoint waits
  // for the peer to progress its worker (measured: 1 s, the bound, with an idle peer, 2 ms with a
  // progressing one), and a peer may be busy elsewhere. A forced close drops what UCX still
  // holds for the endpoint, and a send's completion only means its buffer may be reused (the
  // data may still be queued inside UCX), so the flush is what makes completed sends and the
  // goodbye leave first; where it does not complete within the bound they may be lost.
  void begin_shutdown();
  bool goodbye_sent();
  bool shutdown_flushed();
  PendingOp close_endpoint();
  void release_requests();

  const ConnectionStats& stats() const { return stats_; }

 private:
  struct ChunkSend {
    uint32_t index = 0;
    size_t bytes = 0;
    PendingOp op;
  };
  struct OutgoingMessage {
    enum class Stage { kTagged, kAwaitingReply, kRmaPut, kRmaDone };
    SendRequest* request = nullptr;
    uint64_t sequence = 0;
    size_t chunk_bytes = 0;
    uint32_t chunks = 0;
    Stage stage = Stage::kTagged;
    uint32_t next_chunk = 0;  // the next chunk to post
    uint32_t chunks_done = 0;
    std::deque<ChunkSend> in_flight;
    PendingOp put, flush, done_send;
    uint64_t rkey_region = 0;  // kRmaPut: the offer's region, whose rkey the put holds
    bool holds_rkey = false;
  };
  struct ChunkRecv {
    uint32_t index = 0;
    size_t expected = 0;
    std::byte* buffer = nullptr;
    int staging_slot = -1;  // -1: the direct destination
    PendingOp op;
    bool done = false;
  };
  struct IncomingMessage {
    RecvRequest* request = nullptr;
    uint64_t sequence = 0;
    size_t chunk_bytes = 0;
    uint32_t chunks = 0;
    std::byte* direct = nullptr;  // the sink's direct destination, or nullptr: staged
    bool rma_candidate = false;   // registered direct destination: may be offered to the sender
    bool hold = false;            // only chunk 0 is posted until the sender's way is known
    bool offered = false;         // an offer was sent: chunk 0 brings the rma_done
    uint32_t next_chunk = 0;      // the next chunk to post
    uint32_t next_deliver = 0;    // staged: the next chunk for the sink
    uint32_t chunks_done = 0;
    std::deque<ChunkRecv> in_flight;  // by chunk index
  };
  // A control message in flight whose buffer must outlive its message.
  struct ControlSend {
    std::unique_ptr<ControlWire> wire;
    PendingOp op;
  };
  struct StagingSlot {
    std::unique_ptr<std::byte[]> data;
    size_t size = 0;
    bool busy = false;
  };

  // Sends.
  bool advance_sends();
  bool post_chunk_sends();
  // Every tagged send of this connection: polled, and noted on the worker (UcxWorker::note_sent).
  ucs_status_ptr_t send_tagged(const void* data, size_t bytes, ucp_tag_t tag);
  bool advance_message(OutgoingMessage& m);
  void send_control(ControlWire::Kind kind, uint64_t sequence, uint64_t bytes,
                    const RegisteredRegion* region = nullptr, const std::byte* address = nullptr,
                    bool point_to_point = false);
  void start_rma(OutgoingMessage& m, const ControlWire& offer);
  OutgoingMessage* find_send(uint64_t sequence);
  // Receives.
  bool advance_recvs();
  bool post_chunk_recvs();
  bool post_chunk_recv(IncomingMessage& m);
  bool complete_chunks(IncomingMessage& m);
  void check_chunk(IncomingMessage& m, ChunkRecv& chunk);
  void answer_ready_to_send(IncomingMessage& m, uint64_t sender_bytes);
  IncomingMessage* find_recv(uint64_t sequence);
  int take_staging_slot(size_t bytes);
  void cancel_chunk_receives();
  // Control channel.
  bool poll_controls();
  void handle_control(const ControlWire& control, size_t length);
  void post_control_recv();
  bool reap_control_sends();

  [[noreturn]] void fail(const Error& error);
  [[noreturn]] void fail_mismatch(const IncomingMessage& m, const std::string& what);
  [[noreturn]] void fail_status(const char* what, ucs_status_t status);
  void check_failures();
  void check_notice();
  // The messages to the peer, from 0, that are all complete at this rank (NoticeWire::sent).
  uint64_t sent_prefix();

  int self_;
  UcxWorker& worker_;
  bool rma_ = false;
  ucp_ep_h ep_ = nullptr;
  ucs_status_t endpoint_status_ = UCS_OK;

  std::deque<OutgoingMessage> sends_;
  uint64_t send_sequence_ = 0;
  size_t sends_in_flight_ = 0;  // chunk sends of every message

  std::deque<IncomingMessage> recvs_;
  uint64_t recv_sequence_ = 0;
  size_t direct_in_flight_ = 0;  // chunk receives into destinations
  std::vector<StagingSlot> staging_;
  // kReadyToSend of messages whose receive is not posted yet, by sequence.
  struct Announced {
    uint64_t bytes;       // the sender's size
    bool point_to_point;  // a point-to-point message (a receive from any source may take it)
  };
  std::map<uint64_t, Announced> ready_to_send_;

  ControlWire control_in_{};
  PendingOp control_recv_;
  std::deque<ControlSend> control_sends_;
  RkeyCache rkeys_;

  NoticeWire notice_in_buffer_{};
  PendingOp notice_recv_;
  std::optional<NoticeWire> notice_in_;
  bool notice_reported_ = false;
  NoticeWire notice_out_{};
  PendingOp notice_send_;
  bool notice_sent_ = false;

  HelloWire hello_out_{};
  HelloWire hello_in_{};
  PendingOp hello_send_;
  PendingOp hello_recv_;

  PendingOp shutdown_flush_;
  PendingOp failure_close_;  // the forced close after a failure, completed at teardown

  bool failed_ = false;
  Error error_{cclSuccess, ""};
  ConnectionStats stats_;
};

}  // namespace ccl::transport::ucx
