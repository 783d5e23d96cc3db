// A communicator: its ranks, its connections (one per peer, over shm, tcp or loopback), and the
// collectives, each built as a schedule and run by the executor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/direct.h"
#include "algorithms/double_binary_tree.h"
#include "algorithms/executor.h"
#include "algorithms/point_to_point.h"
#include "algorithms/ring.h"
#include "algorithms/schedule.h"
#include "ccl/ccl.h"
#include "core/bootstrap/store.h"
#include "core/comm_layout.h"
#include "core/deadline.h"
#include "core/reduction_ops.h"
#include "core/tuning/tuner.h"
#include "transport/transport.h"

namespace ccl {

namespace transport {
class LoopbackFabric;
}

struct CommOptions {
  int rank = 0;
  int nranks = 1;
  std::chrono::milliseconds timeout{300000};
  std::string name;  // cclConfig_t.commName, for logs
  // Loopback (ranks as threads of one process, for tests): when set, every peer uses it.
  std::shared_ptr<transport::LoopbackFabric> loopback;
};

class Communicator {
 public:
  // Joins the other ranks through `store` (a fresh namespace of it) and connects to every peer.
  // Collective over all ranks. The store is not needed afterwards.
  static std::shared_ptr<Communicator> create(const CommOptions& options, Store& store);
  ~Communicator();

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

  // cclCommSplit (comm_split.cc): collective over this communicator. Ranks of equal `color`
  // form a new communicator, ordered by (key, rank here); CCL_SPLIT_NOCOLOR gives nullptr.
  // `options` supplies the new communicator's timeout and name (rank and nranks are computed).
  std::shared_ptr<Communicator> split(int color, int key, const CommOptions& options);
  const CommOptions& options() const { return options_; }

  // cclCommFinalize: waits (bounded by the timeout) until the operations queued on streams are
  // done; afterwards every operation fails with InvalidUsage.
  void finalize();
  // Stream work of this communicator: counted so that finalize can wait for it.
  void queued_begin();
  void queued_end();

  ReductionOps& reduction_ops() { return reduction_ops_; }
  const CommLayout& layout() const { return layout_; }
  const tune::Tuner& tuner() const { return *tuner_; }

  // Abort: every wait of this communicator returns RemoteError promptly; safe from any thread.
  void abort();
  bool aborted() const { return abort_.load(); }
  // First error of an operation (cclSuccess if none): the communicator is unusable after one.
  cclResult_t async_error() const { return async_error_.load(); }
  // Marks the communicator failed (the C layer calls it when an operation throws).
  void record_failure(cclResult_t code);
  // Operations fail fast once the communicator has failed or been destroyed.
  void mark_destroyed() { destroyed_.store(true); }

  // cclGetLastError's text. The pointer stays valid until the next failure.
  void set_last_error(const std::string& message);
  const char* last_error();

 private:
  Communicator(const CommOptions& options);
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
  // Runs `schedule` with the scratch it asks for (the caller holds op_mutex_); `what` names it.
  void execute(const algo::Schedule& schedule, const void* input, void* output,
               const algo::ExecOp& op, const char* what);
  // Runs `body(deadline, label)` as operation `what`, recording its failure.
  template <typename Body>
  void run_op(const char* what, Body&& body);
  // The direct (shared-window) path takes this operation of `bytes`.
  bool direct_fits(size_t bytes) const { return direct_ && bytes <= direct_->max_bytes(); }
  // The schedule of `kind` (comm_collectives.cc) built with `choice`'s algorithm and chunking,
  // cached per shape.
  const algo::Schedule& cached(int kind, const tune::Choice& choice, size_t count, int root,
                               size_t elem_size);
  void* scratch(size_t bytes);  // executor scratch of at least `bytes`
  // A builder's parameters for `count` elements of `elem_size` bytes, in chunks of `chunk_bytes`
  // (0: none), over positions in `order`
  // `order`: the layout's ring or tree order.
  algo::ScheduleParams ring_params(size_t count, size_t elem_size, size_t chunk_bytes) const {
    return schedule_params(count, elem_size, chunk_bytes, layout_.ring_order);
  }
  algo::ScheduleParams schedule_params(size_t count, size_t elem_size, size_t chunk_bytes,
                                       std::span<const int> order) const;
  // Allreduce (root -1) or reduce to `root`, as operation `what`; the caller holds op_mutex_.
  void reduce_to(const void* sendbuff, void* recvbuff, size_t count, cclDataType_t type,
                 cclRedOp_t op, int root, const char* what);
  // Starts an operation: the caller holds op_mutex_. Throws if the communicator is unusable.
  void begin_op(const char* what);
  // The input a reduction reads: `sendbuff`, or for PreMulSum a scaled copy of it.
  const void* reduction_input(const Reduction& r, const void* sendbuff, size_t count);
  // A private copy of `bytes` of `data` (for in-place all-to-all, whose input it overwrites).
  const void* staged_copy(const void* data, size_t bytes);

  int rank_;
  int nranks_;
  CommOptions options_;
  algo::WaitPolicy wait_policy_;
  size_t chunk_bytes_ = 0;
  int local_ranks_ = 1;     // ranks on this host, this one included
  bool local_shm_ = false;  // the ranks of a host talk over shared memory (or loopback)
  CommLayout layout_;
  std::unique_ptr<tune::Tuner> tuner_;
  std::mutex tune_log_mutex_;
  std::set<std::pair<int, size_t>> tune_logged_;  // (collective, bytes) whose choice was logged
  std::atomic<uint32_t> fallback_warned_{0};      // bit c: collective c's fallback was logged
  AbortFlag abort_{false};
  std::atomic<bool> destroyed_{false};
  std::atomic<cclResult_t> async_error_{cclSuccess};
  uint64_t sequence_ = 0;

  std::vector<std::unique_ptr<transport::Transport>> transports_;
  algo::PeerLinks links_;
  std::unique_ptr<algo::Executor> executor_;
  std::unique_ptr<algo::DirectCollectives> direct_;  // when every rank shares memory
  std::mutex op_mutex_;                              // one operation at a time on a communicator
  // (kind, algorithm, chunk bytes, count, root, element size) -> schedule
  std::map<std::tuple<int, int, size_t, size_t, int, size_t>, algo::Schedule> schedules_;
  std::vector<std::byte> scratch_;
  std::vector<std::byte> staging_;  // PreMulSum's scaled input, in-place all-to-all's copy
  ReductionOps reduction_ops_;
  std::atomic<bool> finalized_{false};
  std::mutex queued_mutex_;
  std::condition_variable queued_done_;
  int queued_ = 0;  // operations queued on streams and not finished
  std::mutex error_mutex_;
  std::string last_error_;
};

}  // namespace ccl

// The C handle: a reference to the communicator. Queued stream work holds references too, so
// destroy or abort never frees it under a running operation.
struct cclComm {
  static constexpr unsigned kMagic = 0xcc1c0111u;
  unsigned magic = kMagic;
  std::shared_ptr<ccl::Communicator> impl;
};
