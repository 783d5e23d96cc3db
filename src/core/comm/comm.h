// A communicator: its ranks and the collectives over them. It is a thin composition of parts, each
// with one job (src/core/comm/):
//   status       abort flag, destroy and finalize marks, first error, cclGetLastError's text
//   async state  non-blocking init's thread, the NULL-stream queue of a non-blocking communicator,
//                the count of stream work that finalize waits for
//   peers        the layout, the transports and each peer's connection, executor and direct path
//   planner      the tuner, its choice per operation, the schedule cache
//   op runner    one operation at a time under its deadline, the flight recorder, failures and
//                timeouts
// (and TunerSetup, which makes the planner's tuner at init). The collectives (comm_collectives.cc)
// ask the planner and run its choice through the op runner; split is comm_split.cc.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "algorithms/direct.h"
#include "algorithms/double_binary_tree.h"
#include "algorithms/executor.h"
#include "algorithms/point_to_point.h"
#include "algorithms/ring.h"
#include "algorithms/schedule.h"
#include "base/deadline.h"
#include "base/error.h"
#include "ccl/ccl.h"
#include "core/bootstrap/store.h"
#include "core/call/call.h"
#include "core/call/call_target.h"
#include "core/call/reduction_ops.h"
#include "core/comm/async_state.h"
#include "core/comm/comm_layout.h"
#include "core/comm/op_runner.h"
#include "core/comm/options.h"
#include "core/comm/peers.h"
#include "core/comm/planner.h"
#include "core/comm/recovery.h"
#include "core/comm/status.h"
#include "core/device/device_staging.h"
#include "core/device/device_world.h"
#include "core/diagnostics/flight_recorder.h"
#include "core/diagnostics/op_check.h"
#include "core/tuning/tuner.h"
#include "transport/failure_notice.h"
#include "transport/transport.h"

namespace ccl {

class Communicator final : public CallTarget {
 public:
  // Joins the other ranks through `store` (a fresh namespace of it) and connects to every peer.
  // Collective over all ranks. The store is not needed afterwards.
  static std::shared_ptr<Communicator> create(const CommOptions& options, Store& store);
  // Non-blocking init: returns at once; a thread of the communicator gets the store from
  // `connect` (bounded by the deadline, abortable) and joins as create() does. Until it is
  // done, poll_async_error() says cclInProgress and operations wait for it (bounded).
  using StoreConnector = AsyncState::StoreConnector;
  static std::shared_ptr<Communicator> create_async(const CommOptions& options,
                                                    StoreConnector connect);
  ~Communicator();

  bool blocking() const { return options_.blocking; }
  // Non-blocking mode: queues `calls` (one call, or a group's part) on the communicator's own
  // in-order queue; poll_async_error() says cclInProgress until they ran.
  void enqueue_background(Call call);
  void enqueue_background(std::vector<Call> calls);
  // Waits until the background queue ran dry (each operation is bounded; an abort ends them
  // fast). Destroy and abort call it before dropping the handle's reference, so that the last
  // reference is never dropped by the queue's own thread.
  void drain_background();

  int rank() const { return options_.rank; }
  int nranks() const { return options_.nranks; }

  // Runs `call` (call/call.h; its arguments were checked by the C layer) now, on the calling
  // thread: as a device program where this communicator has a device world and the call's
  // buffers are device memory (device_collective), else on the host path (comm_collectives.cc).
  // Throws what fails.
  void run(const Call& call);
  // Runs `calls` in order on the calling thread (a group's part: its sends and receives, then its
  // collectives), stopping at the first failure. Never throws: the failure's code, recorded as
  // the last error and logged.
  cclResult_t run_calls(std::span<const Call> calls) noexcept;
  // CallTarget: run_calls from a queue (a stream's, or the non-blocking queue), then the end of
  // the queued work's count that cclCommFinalize waits for.
  cclResult_t run_queued(std::span<const Call> calls) noexcept override;
  // A call on device buffers as a device program (device/device_world.h), when this
  // communicator has a device world and the call's buffers are device memory: queued on
  // `*cuda_stream` (which may be the legacy stream, NULL), or, without one, run now and waited
  // for. False when the call is not one (host buffers, no device world): then the host path
  // runs it.
  bool device_collective(const Call& call, std::optional<void*> cuda_stream);
  bool has_device_world() const { return device_ != nullptr; }
  // The watchdog's look at this rank's device programs, now (device_world.h: check).
  void poll_device() override {
    if (device_) device_->check(Clock::now());
  }
  // cclRecvAnySource: after everything queued on this communicator (its background queue and
  // every stream) is done, waits for the first peer whose message begins to arrive
  // (Executor::probe_any), receives `bytes` from it into host memory `buffer` as a cclRecv
  // would, and returns that peer.
  int receive_from_any(std::byte* buffer, size_t bytes);

  // cclCommSplit (comm_split.cc): collective over this communicator, after the work queued on a
  // non-blocking one. Ranks of equal `color` form a new communicator, ordered by (key, rank
  // here); CCL_SPLIT_NOCOLOR gives nullptr. `options` supplies the new communicator's timeout,
  // name and mode (rank and nranks are computed); a non-blocking one joins in the background.
  std::shared_ptr<Communicator> split(int color, int key, const CommOptions& options);
  const CommOptions& options() const { return options_; }

  // Recovering from a failed rank (comm_recovery.cc, API.md): they talk over the recovery plane
  // (core/recovery/), never over the transports, so they work on a failed or revoked communicator.
  // cclCommRevoke: this rank's operations fail now with RemoteError, and so do every other
  // rank's (told through their listeners); the communicator can still agree and shrink.
  void revoke();
  // cclCommAgree: the bitwise AND of the flags of the live ranks, the same on every one of them;
  // the ranks found dead are noted (failed_ranks()).
  int agree(int flag);
  // cclCommGetFailedRanks: the ranks known to have failed, increasing. On a communicator that has
  // failed, first asks the other ranks' listeners which are gone (bounded).
  std::vector<int> failed_ranks();
  // cclCommShrink: every rank not in `exclude` (checked by the caller) calls it; with
  // `abort_first` the parent's operation in flight is aborted first, and an empty `exclude`
  // means the ranks found dead. Throws RemoteError when a rank that should shrink died (noted:
  // a second call may exclude it). `options` as for split (rank and nranks are computed).
  std::shared_ptr<Communicator> shrink(std::span<const int> exclude, bool abort_first,
                                       const CommOptions& options);
  // The link figures of this communicator's tuner, for a child made of the same links.
  std::shared_ptr<const tune::Figures> figures() const;

  // cclCommFinalize: waits (bounded by the timeout) until the operations queued on streams are
  // done; afterwards every operation fails with InvalidUsage. Writes the trace (CCL_TRACE_FILE).
  void finalize();
  // Stream work of this communicator: counted so that finalize can wait for it.
  void queued_begin() { async_.queued_begin(); }
  void queued_end() { async_.queued_end(); }

  ReductionOps& reduction_ops() { return reduction_ops_; }
  const CommLayout& layout() const { return peers_.layout(); }
  // After a non-blocking init is done (bounded): its thread connects the peers.
  const char* peer_transport(int peer) const {
    async_.wait_initialized("cclCommPeerTransport");
    return peers_.transport_name(peer);
  }
  const tune::Tuner& tuner() const { return planner_.tuner(); }
  // cclCommRegister / cclCommDeregister (registration_cache.h): after a non-blocking init is
  // done (bounded, as an operation waits for it), since the init thread makes the cache.
  RegistrationCache& registrations(const char* what = "cclCommRegister") {
    async_.wait_initialized(what);
    return peers_.registrations();
  }

  // Abort: every wait of this communicator returns RemoteError promptly; safe from any thread.
  void abort();
  // cclCommAbort: abort(), then, once no operation runs (waiting at most `grace`), tells the
  // peers that this rank aborted (an operation that was running has told them already).
  void abort_and_notify(std::chrono::milliseconds grace);
  bool aborted() const { return status_.aborted(); }
  // First error of an operation (cclSuccess if none): the communicator is unusable after one.
  cclResult_t async_error() const override { return status_.error(); }
  // cclCommGetAsyncError: async_error(), after asking the transports, when no operation runs,
  // whether a peer failed or vanished meanwhile (then that is the error, recorded).
  cclResult_t poll_async_error();
  // Operations fail fast once the communicator has failed or been destroyed.
  void mark_destroyed() { status_.mark_destroyed(); }

  // cclGetLastError's text. The pointer stays valid until the next failure.
  void set_last_error(const std::string& message) { status_.set_last_error(message); }
  // Inside a catch: the exception being handled as a result (current_exception_result,
  // base/error.h: logged, the thread's last error), recorded as this communicator's last error
  // too. The C boundary's guard and queued calls (run_calls) both end a failure here.
  cclResult_t record_exception(const char* function) {
    std::string message;
    const cclResult_t code = current_exception_result(function, &message);
    set_last_error(message);
    return code;
  }
  const char* last_error() { return status_.last_error(); }

 private:
  // The CCL_* settings of the parts, read at construction in this order (a malformed one throws).
  struct Settings {
    bool check_mode;                   // CCL_CHECK_MODE
    size_t trace_ops;                  // CCL_TRACE_BUFFER_SIZE
    size_t chunk_bytes;                // CCL_CHUNKSIZE, or CCL_BUFFSIZE / 4
    trace::TraceSettings trace;        // CCL_TRACE_FILE, CCL_TRACE_MAX_EVENTS
    metrics::MetricsSettings metrics;  // CCL_METRICS_FILE, CCL_METRICS_INTERVAL
    bool cuda_ipc;                     // CCL_CUDA_IPC
    uint64_t cuda_scratch;             // CCL_CUDA_SCRATCH
    size_t staging_chunk;              // CCL_CUDA_STAGING_CHUNK
  };
  static Settings read_settings();
  explicit Communicator(const CommOptions& options);
  Communicator(const CommOptions& options, const Settings& settings);
  void init(Store& store);               // everything create() does after construction
  void make_device_world(Store& store);  // init's last step, collective (through the store)
  // A peer revoked this communicator (on the recovery listener's thread).
  void revoked_by(int by);
  // Waits (bounded by the timeout) until no operation runs, and holds the operation lock.
  std::unique_lock<std::timed_mutex> quiesce(const char* what);
  // The calls, one each (comm_collectives.cc): the device path, else the staging and the host
  // path below.
  void all_reduce(const Call& call);
  void broadcast(const Call& call);
  void reduce(const Call& call);
  void all_gather(const Call& call);
  void all_gather_v(const Call& call);
  void reduce_scatter(const Call& call);
  void all_to_all(const Call& call);
  void all_to_all_v(const Call& call);
  void barrier(const Call& call);
  void point_to_point(const Call& call);  // a group's sends and receives, all posted at once
  // An elementwise call (allreduce, reduce, broadcast: element i of the output depends on element
  // i of the inputs only) through the staging: cut into chunks of staging_chunk_ where the
  // communicator stages in chunks (staging_chunks_, decided for every rank alike) and the call is
  // larger than one, else whole. `run(in, out, count)` runs the host path on `count` elements.
  template <class Run>
  void stage_elementwise(const char* name, const Call& call, CallBuffer input, CallBuffer output,
                         Run&& run);
  // Allreduce (root -1) or reduce to `root`; the caller holds op_mutex_.
  void reduce_to(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                 cclRedOp_t op, int root);
  // The collectives on host buffers (the public ones stage device buffers through staging_ and
  // call these); the caller holds op_mutex_.
  void broadcast_host(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                      int root);
  void all_gather_host(const void* sendbuff, void* recvbuff, size_t sendcount, cclDataType_t type);
  void all_gather_v_host(const void* sendbuff, void* recvbuff, std::span<const size_t> counts,
                         std::span<const size_t> displs, cclDataType_t type);
  void reduce_scatter_host(const void* sendbuff, void* recvbuff, size_t recvcount,
                           cclDataType_t type, cclRedOp_t op);
  void all_to_all_host(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type);
  void all_to_all_v_host(const void* sendbuff, std::span<const size_t> sendcounts,
                         std::span<const size_t> sdispls, void* recvbuff,
                         std::span<const size_t> recvcounts, std::span<const size_t> rdispls,
                         cclDataType_t type);
  void point_to_point_host(std::span<const algo::PointToPoint> operations,
                           std::span<std::byte* const> buffers);

  // The parts, in the order they are built: each gets references to those above it. The
  // destructor first shuts the async state down (joins the init thread, lets the queue finish),
  // while every part is still alive.
  CommOptions options_;
  CommStatus status_;
  AsyncState async_;
  Peers peers_;
  Planner planner_;
  OpRunner runner_;
  ReductionOps reduction_ops_;
  Recovery recovery_;
  DeviceStaging staging_;  // CUDA device buffers through pinned host memory (device_staging.h)
  const bool cuda_ipc_;
  const uint64_t cuda_scratch_;
  const size_t staging_chunk_;
  void* init_context_;  // the CUDA context current where the communicator was made
  // Some rank is bound to a device and there is no device world: large elementwise collectives
  // are cut into chunks on every rank, so that staging overlaps copies and the network.
  bool staging_chunks_ = false;
  // The device collectives of one host's ranks (device/device_world.h), made at init where
  // every rank can; destroyed first (it waits for its programs in flight).
  std::unique_ptr<DeviceWorld> device_;
};

}  // namespace ccl

// The C handle: a reference to the communicator. Queued stream work holds references too, so
// destroy or abort never frees it under a running operation.
struct cclComm {
  static constexpr unsigned kMagic = 0xcc1c0111u;
  unsigned magic = kMagic;
  std::shared_ptr<ccl::Communicator> impl;
};
