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
#pragma once

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
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

  cclComm_t comm() const { return comm_; }
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
  void run_exclusive(const std::function<void(cclComm_t)>& fn);

  // A work failed: shut_down() aborts the communicator instead of destroying it.
  void note_failure() { failed_.store(true); }

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

 private:
  void post_batch_locked();  // the caller holds mutex_
  // Records the work's event after what is queued and hands it to the watcher; a failed record
  // completes the work with that error (false).
  bool start_watching(const c10::intrusive_ptr<WorkCcl>& work);
  void hand_to_watcher(const c10::intrusive_ptr<WorkCcl>& work);
  void watch();

  const int rank_;
  const int size_;
  cclComm_t comm_;
  cclStream_t stream_ = nullptr;
  std::mutex mutex_;  // issue order: held while an operation is queued
  std::vector<c10::intrusive_ptr<WorkCcl>> batch_;  // under mutex_; each holds its launch
  std::atomic<bool> failed_{false};

  std::mutex staging_mutex_;
  std::vector<at::Tensor> free_staging_;  // under staging_mutex_: uint8 buffers, at most kKept
  static constexpr size_t kKept = 8;

  std::mutex watch_mutex_;
  std::condition_variable watch_cv_;
  std::deque<c10::intrusive_ptr<WorkCcl>> watched_;  // under watch_mutex_
  bool stopping_ = false;                            // under watch_mutex_
  std::thread watcher_;
  bool shut_ = false;
};

}  // namespace ccl_torch
