// A communicator: its ranks, its connections (one per peer, over shm, tcp or loopback), and the
// collectives, each built as a schedule and run by the executor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/direct.h"
#include "algorithms/double_binary_tree.h"
#include "algorithms/executor.h"
#include "algorithms/point_to_point.h"
#include "algorithms/ring.h"
#include "algorithms/schedule.h"
#include "base/deadline.h"
#include "ccl/ccl.h"
#include "core/bootstrap/store.h"
#include "core/comm/async_state.h"
#include "core/comm/options.h"
#include "core/comm/status.h"
#include "core/comm_layout.h"
#include "core/flight_recorder.h"
#include "core/op_check.h"
#include "core/reduction_ops.h"
#include "core/tuning/tuner.h"
#include "transport/failure_notice.h"
#include "transport/transport.h"

namespace ccl {

class Communicator {
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
  // Non-blocking mode: queues `work` (a guarded API body) on the communicator's own in-order
  // queue; poll_async_error() says cclInProgress until it ran.
  void enqueue_background(std::function<cclResult_t(Communicator&)> work);
  // Waits until the background queue ran dry (each operation is bounded; an abort ends them
  // fast). Destroy and abort call it before dropping the handle's reference, so that the last
  // reference is never dropped by the queue's own thread.
  void drain_background();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // The collectives (comm_collectives.cc). Arguments were checked by the C layer; counts and
  // displacements are in elements; `op` may be a PreMulSum op of this communicator.
  void all_reduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                  cclRedOp_t op);
  void broadcast(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type, int root);
  void reduce(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type, cclRedOp_t op,
              int root);
  void all_gather(const void* sendbuff, void* recvbuff, size_t sendcount, cclDataType_t type);
  void all_gather_v(const void* sendbuff, void* recvbuff, std::span<const size_t> counts,
                    std::span<const size_t> displs, cclDataType_t type);
  void reduce_scatter(const void* sendbuff, void* recvbuff, size_t recvcount, cclDataType_t type,
                      cclRedOp_t op);
  void all_to_all(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type);
  void all_to_all_v(const void* sendbuff, std::span<const size_t> sendcounts,
                    std::span<const size_t> sdispls, void* recvbuff,
                    std::span<const size_t> recvcounts, std::span<const size_t> rdispls,
                    cclDataType_t type);
  void barrier();
  // The sends and receives of one group, all posted at once; buffers[i] is operation i's.
  void point_to_point(std::span<const algo::PointToPoint> operations,
                      std::span<std::byte* const> buffers);

  // cclCommSplit (comm_split.cc): collective over this communicator, after the work queued on a
  // non-blocking one. Ranks of equal `color` form a new communicator, ordered by (key, rank
  // here); CCL_SPLIT_NOCOLOR gives nullptr. `options` supplies the new communicator's timeout,
  // name and mode (rank and nranks are computed); a non-blocking one joins in the background.
  std::shared_ptr<Communicator> split(int color, int key, const CommOptions& options);
  const CommOptions& options() const { return options_; }

  // cclCommFinalize: waits (bounded by the timeout) until the operations queued on streams are
  // done; afterwards every operation fails with InvalidUsage.
  void finalize();
  // Stream work of this communicator: counted so that finalize can wait for it.
  void queued_begin() { async_.queued_begin(); }
  void queued_end() { async_.queued_end(); }

  ReductionOps& reduction_ops() { return reduction_ops_; }
  const CommLayout& layout() const { return layout_; }
  const tune::Tuner& tuner() const { return *tuner_; }

  // Abort: every wait of this communicator returns RemoteError promptly; safe from any thread.
  void abort();
  // cclCommAbort: abort(), then, once no operation runs (waiting at most `grace`), tells the
  // peers that this rank aborted (an operation that was running has told them already).
  void abort_and_notify(std::chrono::milliseconds grace);
  bool aborted() const { return status_.aborted(); }
  // First error of an operation (cclSuccess if none): the communicator is unusable after one.
  cclResult_t async_error() const { return status_.error(); }
  // cclCommGetAsyncError: async_error(), after asking the transports, when no operation runs,
  // whether a peer failed or vanished meanwhile (then that is the error, recorded).
  cclResult_t poll_async_error();
  // Operations fail fast once the communicator has failed or been destroyed.
  void mark_destroyed() { status_.mark_destroyed(); }

  // cclGetLastError's text. The pointer stays valid until the next failure.
  void set_last_error(const std::string& message) { status_.set_last_error(message); }
  const char* last_error() { return status_.last_error(); }

 private:
  Communicator(const CommOptions& options);
  void init(Store& store);  // everything create() does after construction
  void connect_peers(Store& store);
  void choose_wait_policy();  // from CCL_SPIN_US/CCL_YIELD_US and whether ranks outnumber cores
  // The tuner (comm_tuning.cc): figures from CCL_TUNER_FILE or a probe, rank 0's for everyone.
  void setup_tuner();
  tune::Figures probe_figures(const tune::Shape& shape);
  void probe_direct(tune::Figures* figures, const float* in, float* out, const algo::ExecOp& sum);
  void fit_net_by_exchange(const tune::Shape& shape, tune::Figures* figures, const float* in,
                           float* out, const algo::ExecOp& sum);
  void share_figures(tune::Figures* figures);
  // The tuner's choice for one operation, logged with its cost table under TUNE (once per
  // collective and size) and with a warning when CCL_ALGO/CCL_PROTO allowed nothing.
  tune::Choice plan(tune::Collective collective, size_t bytes);
  void check_usable(const char* what) const;
  // mark_failed(error.code()) for an error thrown by one of its operations, and tells every
  // peer, so that they fail now rather than at their timeout (transport.h). Call it from the
  // thread that holds op_mutex_.
  void record_failure(const Error& error);
  void notify_peers(const transport::FailureNotice& notice);
  // The Timeout to report for `error` (a timeout of the operation `label`, own or a peer's):
  // names the rank that holds everyone up, found along the ranks' wait-for edges.
  Error resolve_timeout(const Error& error, const std::string& label);
  // The current operation waits for `peers` (each time the executor goes to sleep).
  void note_pending(std::span<const int> peers);
  // Runs `schedule` with the scratch it asks for (the caller holds op_mutex_); `what` names it.
  void execute(const algo::Schedule& schedule, const void* input, void* output,
               const algo::ExecOp& op, const char* what);
  // Runs `body(deadline, label)` as operation `what`, recording its failure.
  template <typename Body>
  void run_op(const char* what, Body&& body);
  // The schedule of `choice` (its registry entry's build, registry.h) for `count` elements of
  // `elem_size` bytes (root: broadcast and reduce), cached per shape.
  const algo::Schedule& cached(const tune::Choice& choice, size_t count, int root,
                               size_t elem_size);
  // Runs the operation `what` as `choice` says: its entry's direct run, or its schedule through
  // the executor. `bytes` as the tuner saw it (algo_selection.h).
  void run_choice(const tune::Choice& choice, const char* what, const void* input, void* output,
                  size_t count, size_t bytes, const algo::ExecOp& exec, int root);
  void* scratch(size_t bytes);  // executor scratch of at least `bytes`
  // A builder's parameters for `count` elements of `elem_size` bytes, in chunks of `chunk_bytes`
  // (0: none), over positions in `order`
  // `order`: the layout's ring or tree order.
  algo::ScheduleParams ring_params(size_t count, size_t elem_size, size_t chunk_bytes) const {
    return schedule_params(count, elem_size, chunk_bytes, layout_.ring_order);
  }
  algo::ScheduleParams schedule_params(size_t count, size_t elem_size, size_t chunk_bytes,
                                       std::span<const int> order) const;
  // Allreduce (root -1) or reduce to `root`; the caller holds op_mutex_.
  void reduce_to(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                 cclRedOp_t op, int root);
  // The operation begun by begin_op(), until the end of the caller's scope: recorded as
  // completed then, unless it failed (run_op recorded how) or an exception unwinds it.
  class OpScope {
   public:
    explicit OpScope(Communicator* comm) : comm_(comm), unwinding_(std::uncaught_exceptions()) {}
    ~OpScope();
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

   private:
    Communicator* comm_;
    int unwinding_;
  };
  // Starts an operation: the caller holds op_mutex_. Throws if the communicator is unusable, and
  // with CCL_CHECK_MODE if the ranks disagree on what they call. Records it in the flight recorder.
  [[nodiscard]] OpScope begin_op(const OpInfo& info);
  // CCL_CHECK_MODE: the ranks exchange `info` and compare (op_check.h).
  void check_agreement(const OpInfo& info);
  // Records the current operation's failure by `error` and dumps the flight recorder.
  void end_record(const Error& error);
  // The input a reduction reads: `sendbuff`, or for PreMulSum a scaled copy of it.
  const void* reduction_input(const Reduction& r, const void* sendbuff, size_t count);
  // A private copy of `bytes` of `data` (for in-place all-to-all, whose input it overwrites).
  const void* staged_copy(const void* data, size_t bytes);

  int rank_;
  int nranks_;
  CommOptions options_;
  CommStatus status_;
  AsyncState async_;
  algo::WaitPolicy wait_policy_;
  size_t chunk_bytes_ = 0;
  int local_ranks_ = 1;     // ranks on this host, this one included
  bool local_shm_ = false;  // the ranks of a host talk over shared memory (or loopback)
  CommLayout layout_;
  std::unique_ptr<tune::Tuner> tuner_;
  std::mutex tune_log_mutex_;
  std::set<std::pair<int, size_t>> tune_logged_;  // (collective, bytes) whose choice was logged
  std::atomic<uint32_t> fallback_warned_{0};      // bit c: collective c's fallback was logged
  uint64_t sequence_ = 0;
  Clock::time_point op_start_{};  // of the current operation: its deadline counts from here
  bool check_mode_ = false;       // CCL_CHECK_MODE
  uint64_t checked_collectives_ = 0;
  // The flight recorder (CCL_TRACE_BUFFER_SIZE) and the current operation's record in it.
  std::unique_ptr<FlightRecorder> recorder_;
  uint64_t record_ = 0;
  bool record_ended_ = true;
  // Whom the current operation waits for, when the executor goes to sleep: for the recorder and
  // for resolve_timeout().
  struct PendingObserver final : algo::WaitObserver {
    Communicator* comm = nullptr;
    void waiting_for(std::span<const int> peers) override { comm->note_pending(peers); }
  } pending_observer_;
  std::vector<int> pending_now_;

  std::vector<std::unique_ptr<transport::Transport>> transports_;
  algo::PeerLinks links_;
  std::unique_ptr<algo::Executor> executor_;
  std::unique_ptr<algo::DirectCollectives> direct_;  // when every rank shares memory
  std::timed_mutex op_mutex_;                        // one operation at a time on a communicator
  bool peers_notified_ = false;                      // under op_mutex_
  // (kind, algorithm, chunk bytes, count, root, element size) -> schedule
  std::map<std::tuple<int, int, size_t, size_t, int, size_t>, algo::Schedule> schedules_;
  std::vector<std::byte> scratch_;
  std::vector<std::byte> staging_;  // PreMulSum's scaled input, in-place all-to-all's copy
  ReductionOps reduction_ops_;
};

}  // namespace ccl

// The C handle: a reference to the communicator. Queued stream work holds references too, so
// destroy or abort never frees it under a running operation.
struct cclComm {
  static constexpr unsigned kMagic = 0xcc1c0111u;
  unsigned magic = kMagic;
  std::shared_ptr<ccl::Communicator> impl;
};
