// The asynchronous side of a communicator: the thread of a non-blocking init (cclConfig_t.blocking
// = 0) and its state, which operations wait for (bounded, abortable) until it is done; the
// in-order queue of a non-blocking communicator's NULL-stream work; and the count of work queued
// on streams, which cclCommFinalize waits for. It runs what it is handed (the communicator's init,
// guarded API bodies) and knows no other part than the status, where a failed init leaves its
// error.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/deadline.h"
#include "ccl/ccl.h"
#include "core/bootstrap/store.h"
#include "core/comm/options.h"
#include "core/comm/status.h"
#include "core/stream/stream_work.h"

namespace ccl {

class AsyncState {
 public:
  using StoreConnector = std::function<std::unique_ptr<Store>(Deadline, const AbortFlag*)>;
  // The connector to the rendezvous `id` names, as rank `rank` of `nranks`.
  static StoreConnector through_unique_id(const cclUniqueId& id, int rank, int nranks);

  AsyncState(const CommOptions& options, CommStatus& status);
  ~AsyncState();  // shutdown()
  AsyncState(const AsyncState&) = delete;
  AsyncState& operator=(const AsyncState&) = delete;

  // Non-blocking init: returns at once; a thread gets the store from `connect` (bounded by the
  // deadline, abortable) and runs `init` with it. Until it is done, initializing() is true and
  // wait_initialized() blocks.
  void start_init(StoreConnector connect, std::function<void(Store&)> init);
  // Joins the init thread (aborting an init still running: it gives up within a wait slice), then
  // lets the queued background work finish (each operation is bounded). The communicator calls it
  // first in its destructor, while every other part is still alive.
  void shutdown();
  bool ready() const { return init_state_.load(std::memory_order_acquire) == kReady; }
  bool initializing() const { return init_state_.load(std::memory_order_acquire) == kInitializing; }
  // Blocks (bounded by the timeout, abortable) until a non-blocking init is done; throws its error.
  void wait_initialized(const char* what) const;

  // Non-blocking mode: the queue of NULL-stream work, made at the end of init.
  void open_queue();
  // Queues `work` (counted by queued_begin() here; its target's run_queued ends the count) on
  // the in-order queue.
  void enqueue(StreamWork work);
  // Waits until the queue ran dry (each operation is bounded; an abort ends them fast).
  void drain();
  // Work is queued or running on the queue.
  bool queue_busy();

  // Stream work of this communicator: counted so that finalize can wait for it.
  void queued_begin();
  void queued_end();
  // The wait of `what` (cclCommFinalize, cclRecvAnySource), bounded by the timeout, until the
  // work queued on streams is done.
  void wait_queued(const char* what = "cclCommFinalize");

 private:
  const CommOptions& options_;
  CommStatus& status_;
  // Non-blocking init: its thread and its state (kReady when created by create()).
  enum InitState : int { kReady, kInitializing, kInitFailed };
  std::atomic<int> init_state_{kReady};
  mutable std::mutex init_mutex_;
  mutable std::condition_variable init_done_;
  std::thread init_thread_;
  std::unique_ptr<cclStream> background_;  // non-blocking mode's queue of NULL-stream work
  std::mutex queued_mutex_;
  std::condition_variable queued_done_;
  std::atomic<int> queued_{0};  // operations queued on streams and not finished
};

}  // namespace ccl
