// The in-order path of one process group's operations: its ccl communicator and stream, the
// batch of point-to-point operations not yet posted, and the watcher thread that completes works
// in issue order. Works hold it by shared_ptr, so a Work outlives its process group safely.
//
// Point-to-point operations are batched: isend/irecv go into a batch that is posted as one ccl
// group (cclGroupStart/End on the stream) when the next collective is issued, or when any work of
// the batch is waited on or queried. Posted one by one on an in-order stream, the common exchange
// "isend to the right, irecv from the left, wait for both" would have every rank's send wait for
// a receive queued behind its peer's own send; as one group, each rank's sends and receives
// progress together (ccl's groups match a pair's messages in posting order, whatever the order
// of sends and receives on the two sides).
//
// The watcher completes works, and completing a work runs its future's callbacks. A callback may
// issue an operation on the same group and wait for its future (torch's PowerSGD hook does, with
// Future.wait, which no code of ccl's sees): the watcher stuck in that callback cannot complete it.
// So the watcher is a small pool (at most kMaxWatchers threads) in which one thread at a time
// drives the queue; a callback that issues an operation on its own group hands the driving to
// another thread (started on first need) for as long as it runs. The common path, callbacks that
// issue nothing, costs no wake-up. A callback that waits for an operation issued before it, or
// callbacks nested deeper than the pool, still wait until the communicator's timeout, then fail.
//
// The communicator handle outlives every call made with it: the calls that do not take the
// issue lock (revoke, agree, failed ranks, a shrink that aborts, error texts) hold handle_mutex_
// shared, and only shut_down and abort free the handle, holding it exclusively. abort() first
// revokes the communicator, which ends every call in flight at once (a blocking call of
// run_exclusive's included), so that it never waits for the communicator's timeout.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccl/ccl.h"
#include "work_ccl.h"

namespace ccl_torch {

class OpLane : public std::enable_shared_from_this<OpLane> {
 public:
  OpLane(cclComm_t comm, int rank, int size);
  ~OpLane();
  OpLane(const OpLane&) = delete;
  OpLane& operator=(const OpLane&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Posts the pending point-to-point batch, then `launch`, records the work's event and hands the
  // work to the watcher. A launch that fails raises at once (c10::Error naming the operation).
  void submit(const c10::intrusive_ptr<WorkCcl>& work, Launch launch);
  // Adds a send or receive to the pending batch.
  void submit_p2p(const c10::intrusive_ptr<WorkCcl>& work, Launch launch);
  // Posts the pending batch now (endCoalescing: batch_isend_irecv's operations start together).
  void post_batch();
  // Posts the pending batch if `work` is in it (a wait or query on it must not wait forever).
  void post_batch_holding(const WorkCcl* work);

  // Runs fn(comm) with the group to itself: the pending batch posted, every queued operation
  // complete, and no other operation issued until fn returns, so fn may call blocking ccl
  // collectives on comm (the training layer's compressors do) in the group's issue order.
  // Raises (c10::Error) if the queued operations failed or the group was destroyed.
  // `name` names the caller in the refusals.
  void run_exclusive(const std::function<void(cclComm_t)>& fn, const char* name = "run_exclusive");
  // Runs fn(comm) now, without waiting for the queued operations (the recovery calls, which
  // must reach a communicator whose operations are stuck); raises naming `name` if fn fails.
  // Refused once shut_down or abort began (a shrunk group still takes them).
  void call(const char* name, const std::function<cclResult_t(cclComm_t)>& fn);
  // Raises the failure `result` of ccl call `name` (c10::ValueError for refused arguments,
  // c10::Error otherwise), with the communicator's last error.
  [[noreturn]] void raise(const char* name, cclResult_t result) const;

  // A work failed with `result`: shut_down() aborts the communicator instead of destroying it,
  // and first_failure() tells the first such result (Backend::getError).
  void note_failure(cclResult_t result) {
    cclResult_t none = cclSuccess;
    first_failure_.compare_exchange_strong(none, result);
  }
  cclResult_t first_failure() const { return first_failure_.load(); }

  // A contiguous buffer of `numel` elements of `options`' dtype for an operation's staging (the
  // packed inputs or outputs of the list forms), reused across operations: a fresh 32 MiB
  // buffer costs 24 ms of page faults here before the first byte is useful (the allgather of
  // 16 MiB through a fresh buffer took 62 ms against 11 ms for _allgather_base). The work gives
  // it back when it completes.
  at::Tensor staging(const c10::intrusive_ptr<WorkCcl>& work, int64_t numel,
                     const at::TensorOptions& options);

  // "ccl <name>: <ccl's error string>: <cclGetLastError>".
  std::string error_text(const char* name, cclResult_t result) const;
  // Completes every queued work, stops the watcher and destroys (or, after a failure, aborts)
  // the communicator. Idempotent.
  void shut_down();
  // Ends the group now: revokes the communicator (every operation in flight here and on the
  // peers fails at once), fails the pending batch, then shuts down and aborts the communicator.
  // Every later operation raises "the process group was aborted". Idempotent.
  void abort();
  // A shrink with abort ended this group's communicator: later operations raise, naming the
  // group to use instead; the recovery calls (call) still work, so a failed shrink can retry.
  void mark_shrunk();

 private:
  enum class State { kOpen, kShrunk, kAborted, kShut };
  // Raises, naming operation `name`, unless the group takes operations (the caller holds
  // mutex_).
  void check_open_locked(const char* name) const;
  void fail_batch_locked(const std::string& text);  // completes the pending batch with `text`
  void stop(bool abort_comm);                       // shut_down's and abort's common end
  // error_text's body; the caller holds handle_mutex_.
  std::string describe_locked(const char* name, cclResult_t result) const;
  void post_batch_locked();  // the caller holds mutex_
  // Records the work's event after what is queued and hands it to the watcher; a failed record
  // completes the work with that error (false).
  bool start_watching(const c10::intrusive_ptr<WorkCcl>& work);
  void hand_to_watcher(const c10::intrusive_ptr<WorkCcl>& work);
  void watch();  // one watcher thread's loop
  // Waits until no thread of the pool drives and a work is queued, and takes the driving; false
  // once stopping with nothing left.
  bool take_driving();
  // The driver's next work, or none: then the driving is given up.
  c10::intrusive_ptr<WorkCcl> next_to_drive();
  // Drives `work` to completion (its future's callbacks run here).
  void complete(c10::intrusive_ptr<WorkCcl> work);
  // Drops the works the watcher held last (finished_) on the calling thread.
  void release_finished();

  const int rank_;
  const int size_;
  mutable std::shared_mutex handle_mutex_;  // comm_'s lifetime (above)
  cclComm_t comm_;                          // null once freed
  cclStream_t stream_ = nullptr;
  std::mutex mutex_;  // issue order: held while an operation is queued
  std::vector<c10::intrusive_ptr<WorkCcl>> batch_;  // under mutex_; each holds its launch
  std::atomic<cclResult_t> first_failure_{cclSuccess};
  std::atomic<State> state_{State::kOpen};  // changed under mutex_ (abort: first without it)

  std::mutex staging_mutex_;
  std::vector<at::Tensor> free_staging_;  // under staging_mutex_: uint8 buffers, at most kKept
  static constexpr size_t kKept = 8;

  static constexpr size_t kMaxWatchers = 4;
  std::mutex watch_mutex_;
  std::condition_variable watch_cv_;
  std::deque<c10::intrusive_ptr<WorkCcl>> watched_;  // under watch_mutex_
  bool stopping_ = false;                            // under watch_mutex_
  bool driving_ = false;  // under watch_mutex_: a watcher thread is taking works off watched_
  size_t idle_ = 0;       // under watch_mutex_: watcher threads waiting for the driving
  // Works the watcher completed and was the last to hold: a thread of the caller's drops them
  // (the next operation, or shut-down), never the watcher (watch() says why).
  std::vector<c10::intrusive_ptr<WorkCcl>> finished_;  // under watch_mutex_
  std::vector<std::thread> watchers_;                  // under watch_mutex_; grows only
  bool stopped_ = false;                               // under mutex_: stop() ran or runs
};

}  // namespace ccl_torch
