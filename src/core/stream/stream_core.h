// The work of one cclStream_t: an in-order queue, run one item at a time either by the stream's
// worker thread or by a thread that waits for it (cclStreamSynchronize, cclEventSynchronize).
// Events and other streams hold it by shared_ptr, so what they marked can still be asked about
// after the stream itself was destroyed.
//
// Why a waiter runs the work itself. The common pattern is "queue many operations, then
// synchronize" (nccl-tests' default mode, a training step). With the work left to the worker, a
// rank has two busy threads, and with ranks outnumbering cores each rank's worker is preempted by
// its own main thread while its peers wait for it: measured on 2 cores, 2 ranks, 8 B allreduce,
// 5-17 us per operation against 0.47 us on the NULL stream. Here the synchronizing thread takes
// over at the next item boundary (the worker hands over and sleeps), so the work runs on the
// thread that would otherwise only sleep, as a blocking call would. The worker still progresses
// the queue while nobody waits (a training step overlapping compute with its allreduces).
//
// Numbering: the n-th item queued has sequence number n (from 1). A point `seq` is reached when
// `completed() >= seq`. The first failed item is remembered for good: an event recorded after it
// reports it (as CUDA's sticky errors), while cclStreamSynchronize returns the first failure since
// the previous synchronize.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "ccl/ccl.h"
#include "core/stream/ring_queue.h"
#include "core/stream/stream_work.h"

namespace ccl {

class StreamCore {
 public:
  // The worker polls for new work (yielding its core) for `idle_poll` before it sleeps: a worker
  // that slept after each item would cost every operation a futex wake-up (about 47 us here).
  explicit StreamCore(std::chrono::microseconds idle_poll);

  // The queue's room, allocated (and touched) when the stream is made (stream_work.h: its size).
  // A queue that grew while it filled paid for its fresh memory inside the timed work (about 2 us
  // a page on this VM, inferred from the figures below), and nccl-tests' first timed column (2000
  // 8-byte allreduces queued, 2 ranks) took 0.59-0.62 us per call against 0.44-0.50 in the next
  // cycle of the same launch; with 10000 queued, 0.76-0.95 out of place against 0.58-0.72 in place.
  // So the queue never grows: enqueue() makes room first (issue 29).
  static constexpr size_t kQueueSlots = 4096;

  // Queues `work`, which may take up to `timeout` (its communicator's): a waiter allows that long
  // (plus a grace) between two completed items before it gives up with cclTimeout. Returns the
  // item's sequence number. With kQueueSlots items waiting, first runs the oldest on the calling
  // thread until half of them are done (bounded as run_until; cclTimeout if the stream stalls).
  uint64_t enqueue(StreamWork work, std::chrono::milliseconds timeout);
  uint64_t queued() const;  // sequence number of the last item queued (0: none)
  uint64_t completed() const { return completed_.load(std::memory_order_acquire); }

  // cclSuccess once point `seq` is reached without a failure at or before it; that failure's code
  // once it is reached with one; cclInProgress before.
  cclResult_t status(uint64_t seq) const;
  // Runs the items up to `seq` on the calling thread (after the item the worker is running, if
  // any) until point `seq` is reached. False if the stream completed nothing for stall_bound().
  bool run_until(uint64_t seq);
  // Waits, without running anything, until point `seq` is reached (bounded as run_until).
  bool wait_until(uint64_t seq);
  // The longest timeout of the work queued so far (CCL_TIMEOUT at least) plus a grace: how long
  // a waiter lets the stream go without completing an item.
  std::chrono::milliseconds stall_bound() const;
  // Throws cclTimeout for a run_until/wait_until of `what` that returned false.
  [[noreturn]] void throw_stalled(const char* what) const;
  // The first failure since the previous call (cclStreamSynchronize's result); clears it.
  cclResult_t take_error();
  // The first failure since the previous take_error(), left as it is.
  cclResult_t peek_error() const;

  // The worker thread's body: runs items while no waiter takes over, until stop().
  void worker_loop();
  void stop();  // the worker returns once the queue is empty

 private:
  // Pops the next item if there is one (under mutex_); `seq` gets its number.
  bool pop(StreamWork* item, uint64_t* seq);
  // Pops the items up to point `up_to`, at most kBatchItems of them, into batch_ (the caller
  // holds run_mutex_); returns the first one's sequence number.
  uint64_t pop_batch(uint64_t up_to);
  void run_one(StreamWork& item, uint64_t seq);  // the caller holds run_mutex_
  // Waits until the stream's epoch differs from `seen` (an item completed, or the worker let go
  // of run_mutex_); false at `deadline`. Polls with sched_yield for a short while first.
  bool wait_for_change(uint64_t seen, std::chrono::steady_clock::time_point deadline);
  void bump_epoch();  // and wakes the threads asleep on progress_
  // Shared by run_until (run = true) and wait_until.
  bool reach(uint64_t seq, bool run);

  const std::chrono::microseconds idle_poll_;
  mutable std::mutex mutex_;  // the queue, the counters below it and the condition variables
  std::condition_variable work_ready_;
  std::condition_variable progress_;
  RingQueue<StreamWork> queue_;
  uint64_t enqueued_ = 0;       // under mutex_
  bool worker_asleep_ = false;  // under mutex_
  bool stopping_ = false;       // under mutex_
  int takers_ = 0;              // under mutex_: waiters that want to run the work themselves
  cclResult_t sync_error_ = cclSuccess;     // under mutex_: since the last take_error()
  std::atomic<int> takers_hint_{0};         // takers_, read by the worker between items
  std::atomic<uint64_t> enqueued_hint_{0};  // enqueued_, polled by the idle worker
  std::atomic<int> sleepers_{0};            // threads asleep on progress_
  std::atomic<uint64_t> epoch_{0};          // completions and hand-overs, for waiters
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> first_failure_seq_{UINT64_MAX};
  std::atomic<cclResult_t> first_failure_{cclSuccess};
  std::atomic<int64_t> longest_timeout_ms_{0};
  std::mutex run_mutex_;           // held by the one thread running items
  std::vector<StreamWork> batch_;  // under run_mutex_: a waiter's items, popped a few at once
  static constexpr size_t kBatchItems = 32;  // batch_ never grows beyond them
};

}  // namespace ccl
