#include "core/comm/comm.h"

#include <algorithm>
#include <thread>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "core/comm/tuner_setup.h"
#include "core/diagnostics/signal_dump.h"
#include "cuda/cuda_driver.h"
#include "cuda/stream_ops.h"

namespace ccl {

Communicator::Settings Communicator::read_settings() {
  Settings settings;
  settings.check_mode = config_bool("CCL_CHECK_MODE");
  const int64_t trace_ops = config_int("CCL_TRACE_BUFFER_SIZE");
  if (trace_ops < 0 || trace_ops > (1 << 20)) {
    throw_error(cclInvalidUsage, "CCL_TRACE_BUFFER_SIZE=%lld must be in [0, 1048576]",
                static_cast<long long>(trace_ops));
  }
  settings.trace_ops = static_cast<size_t>(trace_ops);
  int64_t chunk = config_int("CCL_CHUNKSIZE");
  if (chunk <= 0) chunk = config_int("CCL_BUFFSIZE") / 4;
  // Chunks are multiples of 64 bytes, so every chunk of every datatype starts element-aligned.
  settings.chunk_bytes = std::max<int64_t>(64, chunk / 64 * 64);
  settings.trace.file = config_string("CCL_TRACE_FILE");
  const int64_t max_events = config_int("CCL_TRACE_MAX_EVENTS");
  if (max_events < 0 || max_events > (int64_t{1} << 30)) {
    throw_error(cclInvalidUsage, "CCL_TRACE_MAX_EVENTS=%lld must be in [0, 1073741824]",
                static_cast<long long>(max_events));
  }
  settings.trace.max_events = static_cast<size_t>(max_events);
  settings.metrics = metrics::read_metrics_settings();
  settings.cuda_ipc = config_bool("CCL_CUDA_IPC");
  const int64_t scratch = config_int("CCL_CUDA_SCRATCH");
  if (scratch < 65536 || scratch > (int64_t{1} << 40)) {
    throw_error(cclInvalidUsage, "CCL_CUDA_SCRATCH=%lld must be in [64K, 1T] bytes",
                static_cast<long long>(scratch));
  }
  settings.cuda_scratch = static_cast<uint64_t>(scratch);
  const int64_t staging_chunk = config_int("CCL_CUDA_STAGING_CHUNK");
  if (staging_chunk < 4096) {
    throw_error(cclInvalidUsage, "CCL_CUDA_STAGING_CHUNK=%lld must be at least 4K bytes",
                static_cast<long long>(staging_chunk));
  }
  settings.staging_chunk = static_cast<size_t>(staging_chunk);
  return settings;
}

namespace {
CommOptions with_cuda_context(CommOptions options) {
  options.cuda_context = cuda::current_context() != nullptr;
  return options;
}
}  // namespace

Communicator::Communicator(const CommOptions& options) : Communicator(options, read_settings()) {}

Communicator::Communicator(const CommOptions& options, const Settings& settings)
    : options_(with_cuda_context(options)),
      async_(options_, status_),
      peers_(options_, &status_.abort_flag()),
      planner_(options_, peers_.layout(), settings.chunk_bytes),
      runner_(options_, settings.check_mode, settings.trace_ops, settings.trace, status_, async_,
              peers_, planner_, settings.metrics),
      recovery_(options_.rank, options_.nranks),
      cuda_ipc_(settings.cuda_ipc),
      cuda_scratch_(settings.cuda_scratch),
      staging_chunk_(settings.staging_chunk),
      init_context_(cuda::current_context()) {}

Communicator::~Communicator() {
  // Revokes from peers stop first: they call into the parts below.
  recovery_.close();
  // Joins the init thread and lets the background work finish while every part is alive.
  async_.shutdown();
}

std::shared_ptr<Communicator> Communicator::create(const CommOptions& options, Store& store) {
  std::shared_ptr<Communicator> comm(new Communicator(options));
  comm->init(store);
  return comm;
}

std::shared_ptr<Communicator> Communicator::create_async(const CommOptions& options,
                                                         StoreConnector connect) {
  std::shared_ptr<Communicator> comm(new Communicator(options));
  // The thread uses the communicator, which outlives it: the destructor joins it.
  Communicator* c = comm.get();
  c->async_.start_init(std::move(connect), [c](Store& store) { c->init(store); });
  return comm;
}

void Communicator::init(Store& store) {
  // The recovery endpoint is open on every rank before any rank returns from init: a rank's
  // first agreement may come at once.
  peers_.connect(store, [this] {
    recovery_.open({peers_.comm_tag(), peers_.recovery_key()}, peers_.recovery_listeners(),
                   [this](int by) { revoked_by(by); });
  });
  runner_.connected();  // the trace's file is named after the communicator's tag
  try {
    TunerSetup(options_, peers_, planner_, runner_).run();  // runs collectives
  } catch (const Error& e) {
    peers_.notify(transport::notice_for(e, rank()));
    throw;
  }
  make_device_world(store);
  if (!options_.blocking) async_.open_queue();
  register_recorder(runner_.recorder());  // SIGUSR1 dumps it
  CCL_INFO(kInit, "communicator %s rank %d of %d ready", options_.name.c_str(), rank(), nranks());
}

void Communicator::make_device_world(Store& store) {
  // What every rank told at the rendezvous decides, the same everywhere: a world where every
  // rank of one host is bound to a device; else the staging pipelines chunks where any rank is
  // (the other ranks' calls must be cut into the same chunks, whatever their buffers).
  const std::vector<bool>& contexts = peers_.cuda_contexts();
  const bool any = std::find(contexts.begin(), contexts.end(), true) != contexts.end();
  const bool every = std::find(contexts.begin(), contexts.end(), false) == contexts.end();
  staging_chunks_ = any;
  if (layout().nhosts != 1 || nranks() < 2 || !every) return;
  DeviceWorld::Setup setup;
  setup.rank = rank();
  setup.nranks = nranks();
  setup.comm_tag = peers_.comm_tag();
  setup.context = init_context_;
  setup.enabled = cuda_ipc_;
  setup.half_bytes = cuda_scratch_ / 2 / 256 * 256;
  setup.timeout = options_.timeout;
  setup.abort = &status_.abort_flag();
  setup.on_failure = [this](cclResult_t code, const std::string& message) {
    status_.set_last_error(message);
    status_.mark_failed(code);
  };
  // Exchanged through the rendezvous store, not a collective: the setup is no operation of the
  // communicator (no sequence number, no trace, no check mode).
  int round = 0;
  device_ = DeviceWorld::create(setup, [&](const void* mine, void* all, size_t bytes) {
    const std::string prefix = "cuda/" + std::to_string(round++) + "/";
    const auto* p = static_cast<const uint8_t*>(mine);
    store.set(prefix + std::to_string(rank()), Bytes(p, p + bytes));
    const Deadline deadline = Deadline::after(options_.timeout);
    for (int q = 0; q < nranks(); ++q) {
      const Bytes theirs = store.get(prefix + std::to_string(q), deadline);
      if (theirs.size() != bytes) {
        throw_error(cclInternalError, "device collectives setup: rank %d sent %zu bytes, not %zu",
                    q, theirs.size(), bytes);
      }
      std::copy(theirs.begin(), theirs.end(), static_cast<uint8_t*>(all) + q * bytes);
    }
  });
  staging_chunks_ = device_ == nullptr;
}

void Communicator::drain_background() { async_.drain(); }

// The communicator owns this queue: its items point at it without a reference (one would let the
// queue's own thread drop the last reference and join itself). Destroy and abort drain the queue
// before they drop the handle's.
void Communicator::enqueue_background(Call call) {
  async_.enqueue(StreamWork::of_call(std::shared_ptr<CallTarget>(std::shared_ptr<void>(), this),
                                     std::move(call)));
}

void Communicator::enqueue_background(std::vector<Call> calls) {
  async_.enqueue(StreamWork::of_group(std::shared_ptr<CallTarget>(std::shared_ptr<void>(), this),
                                      std::move(calls)));
}

// Abort releases every wait; cclCommAbort and cclCommGetAsyncError tell the peers of a failure,
// or learn of theirs, while no operation runs (the op runner does while one runs).
void Communicator::abort() {
  status_.abort();
  // During a non-blocking init the transports are being built: its waits see the flag.
  if (!async_.ready()) return;
  peers_.interrupt();
  // The device programs of every rank go on (released); the peers learn of it from the page.
  if (device_) device_->fail(cclRemoteError, "the communicator was aborted");
}

void Communicator::abort_and_notify(std::chrono::milliseconds grace) {
  abort();
  if (!async_.ready()) return;
  std::unique_lock<std::timed_mutex> lock;
  // An operation still running after the grace tells the peers itself.
  if (!runner_.lock_by(lock, Deadline::after(grace))) return;
  peers_.notify(transport::abort_notice(rank()));
}

cclResult_t Communicator::poll_async_error() {
  if (async_.initializing()) return cclInProgress;
  cclResult_t current = status_.error();
  if (current != cclSuccess || status_.destroyed() || status_.aborted()) return current;
  if (async_.queue_busy()) return cclInProgress;
  std::unique_lock lock(runner_.mutex(), std::try_to_lock);
  if (!lock.owns_lock()) return current;  // an operation runs: it will see any failure itself
  try {
    peers_.check_health();
  } catch (const Error& e) {
    CCL_WARN(kAll, "rank %d: %s", rank(), e.what());
    set_last_error(e.what());
    runner_.record_failure(e);
  }
  return status_.error();
}

}  // namespace ccl
