#include "core/comm/async_state.h"

#include <string>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap/tcp_store.h"
#include "core/stream/stream.h"

namespace ccl {

AsyncState::AsyncState(const CommOptions& options, CommStatus& status)
    : options_(options), status_(status) {}

AsyncState::~AsyncState() { shutdown(); }

AsyncState::StoreConnector AsyncState::through_unique_id(const cclUniqueId& id, int rank,
                                                         int nranks) {
  return [id, rank, nranks](Deadline deadline, const AbortFlag* abort) {
    const UniqueIdContents contents = decode_unique_id(id);
    return std::unique_ptr<Store>(
        TcpStore::connect(contents.root, contents.secret, rank, nranks, deadline, abort));
  };
}

void AsyncState::start_init(StoreConnector connect, std::function<void(Store&)> init) {
  init_state_.store(kInitializing);
  // The thread uses the communicator, which outlives it: its destructor joins it (shutdown()).
  init_thread_ = std::thread([this, connect = std::move(connect), init = std::move(init)] {
    log_set_thread_rank(options_.rank);
    int state = kReady;
    try {
      std::unique_ptr<Store> store =
          connect(Deadline::after(options_.timeout), &status_.abort_flag());
      init(*store);
    } catch (const Error& e) {
      status_.set_last_error(std::string("cclCommInitRank: ") + e.what());
      CCL_WARN(kInit, "cclCommInitRank (non-blocking): %s", e.what());
      status_.set_init_error(e.code());
      state = kInitFailed;
    } catch (const std::exception& e) {
      status_.set_last_error(std::string("cclCommInitRank: internal error: ") + e.what());
      status_.set_init_error(cclInternalError);
      state = kInitFailed;
    }
    std::lock_guard lock(init_mutex_);
    init_state_.store(state, std::memory_order_release);
    init_done_.notify_all();
  });
}

void AsyncState::shutdown() {
  if (init_thread_.joinable()) {
    if (init_state_.load() == kInitializing) status_.abort();  // gives up within a wait slice
    init_thread_.join();
  }
  // Background work holds no reference to the communicator: let it finish (each operation is
  // bounded) first.
  background_.reset();
}

void AsyncState::wait_initialized(const char* what) const {
  std::unique_lock lock(init_mutex_);
  const Deadline deadline = Deadline::after(options_.timeout);
  while (init_state_.load() == kInitializing) {
    if (status_.aborted()) throw_error(cclInvalidUsage, "%s: the communicator was aborted", what);
    if (deadline.expired()) {
      throw_error(cclTimeout, "%s: the communicator's non-blocking init did not finish", what);
    }
    init_done_.wait_for(lock, std::chrono::milliseconds(20));
  }
  if (init_state_.load() == kInitFailed) {
    throw_error(status_.error(), "%s: the communicator's initialization failed", what);
  }
}

void AsyncState::open_queue() { background_ = std::make_unique<cclStream>(); }

void AsyncState::drain() {
  if (init_state_.load(std::memory_order_acquire) == kReady && background_) {
    (void)background_->drain();  // its errors are the communicator's async error already
  }
}

void AsyncState::enqueue(StreamWork work) {
  wait_initialized("enqueue");  // background_ exists once init is done
  if (!background_) throw_error(cclInternalError, "no background queue on a blocking communicator");
  queued_begin();
  try {
    background_->enqueue(std::move(work), options_.timeout);
  } catch (...) {
    queued_end();  // not queued after all
    throw;
  }
}

bool AsyncState::queue_busy() { return background_ && background_->query() == cclInProgress; }

// An atomic count on the stream path (two per queued operation); the lock only when the count
// reaches zero, for finalize's wait.
void AsyncState::queued_begin() { queued_.fetch_add(1); }

void AsyncState::queued_end() {
  if (queued_.fetch_sub(1) == 1) {
    { std::lock_guard<std::mutex> lock(queued_mutex_); }  // a finalize between its check and wait
    queued_done_.notify_all();
  }
}

void AsyncState::wait_queued(const char* what) {
  std::unique_lock<std::mutex> lock(queued_mutex_);
  if (!queued_done_.wait_for(lock, options_.timeout, [&] { return queued_.load() == 0; })) {
    throw_error(cclTimeout, "%s: %d operation(s) queued on streams did not finish", what,
                queued_.load());
  }
}

}  // namespace ccl
