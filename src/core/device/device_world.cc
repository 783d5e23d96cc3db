#include "core/device/device_world.h"

#include <algorithm>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "core/device/device_watchdog.h"
#include "cuda/cuda_driver.h"
#include "transport/shm/shm_segment.h"

namespace ccl {

namespace {

// One rank's part of the setup exchange.
struct Offer {
  cuda::IpcBuffer scratch;
  cuda::DeviceUuid device;
  int32_t ok = 0;
  int32_t pad = 0;
};

bool all_true(const std::vector<char>& answers) {
  return std::all_of(answers.begin(), answers.end(), [](char a) { return a != 0; });
}

// Wrap-safe "a is at or past b".
bool reached(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

}  // namespace

DeviceWorld::DeviceWorld(const Setup& setup)
    : rank_(setup.rank),
      nranks_(setup.nranks),
      half_bytes_(setup.half_bytes),
      timeout_(setup.timeout),
      abort_(setup.abort),
      on_failure_(setup.on_failure),
      context_(setup.context),
      peers_(setup.nranks, nullptr) {}

std::unique_ptr<DeviceWorld> DeviceWorld::create(const Setup& setup, const AllGather& all_gather) {
  const int n = setup.nranks;
  std::unique_ptr<DeviceWorld> world(new DeviceWorld(setup));
  const std::string page_name = transport::shm::segment_name(setup.comm_tag + "-cuda", 0);
  std::unique_ptr<FlagPage> page;
  Offer mine;
  std::string why;
  if (!setup.enabled) {
    why = "CCL_CUDA_IPC=0";
  } else if (n > kMaxRanks) {
    why = "more than " + std::to_string(kMaxRanks) + " ranks";
  } else if (cuda::cuda_driver() == nullptr) {
    why = cuda::cuda_unavailable_reason();
  } else if (!cuda::have_kernels()) {
    why = "this build has no CUDA kernels";
  } else if (setup.context == nullptr) {
    why = "no CUDA context was current when the communicator was made";
  } else {
    try {
      cuda::ContextScope scope(setup.context);
      world->scratch_ = cuda::DeviceAllocation(2 * setup.half_bytes);
      mine.scratch = cuda::export_buffer(world->scratch_.data());
      mine.device = cuda::current_device_uuid();
      if (setup.rank == 0) page = FlagPage::create(page_name, n);
      mine.ok = mine.scratch.valid;
      if (!mine.ok) why = "its scratch cannot be shared through CUDA IPC";
      // The flags are stream memory operations, which some drivers refuse. The probe writes the
      // scratch's first word: done before any peer can write there (the exchange below).
      if (mine.ok) {
        void* own = world->own_stream_.get(setup.context);
        if (cuda::takes_mem_ops(own, reinterpret_cast<uint64_t>(world->scratch_.data()))) {
          cuda::Event probed;
          probed.record(own);
          probed.wait(Clock::now() + setup.timeout);
        } else {
          mine.ok = 0;
          why = "the CUDA driver refuses stream memory operations (cuStreamBatchMemOp)";
        }
      }
    } catch (const Error& e) {
      why = e.what();
    }
  }
  std::vector<Offer> offers(n);
  all_gather(&mine, offers.data(), sizeof(Offer));
  const auto declined =
      std::find_if(offers.begin(), offers.end(), [](const Offer& o) { return o.ok == 0; });
  if (declined != offers.end()) {
    if (!why.empty()) {
      CCL_INFO(kInit, "rank %d: no device collectives on this host: %s", setup.rank, why.c_str());
    }
    return nullptr;
  }
  cuda::ContextScope scope(setup.context);
  // Every device must read every other's memory, and the slowest link decides the cost model:
  // the same answer everywhere.
  uint8_t slowest = static_cast<uint8_t>(cuda::PeerLink::SameDevice);
  for (const Offer& o : offers) {
    slowest = std::max(slowest, static_cast<uint8_t>(cuda::link_to(o.device)));
  }
  std::vector<uint8_t> links(n);
  all_gather(&slowest, links.data(), 1);
  world->link_ = static_cast<cuda::PeerLink>(*std::max_element(links.begin(), links.end()));
  if (world->link_ == cuda::PeerLink::None) {
    CCL_INFO(kInit,
             "no device collectives: some rank cannot read a peer's GPU memory (no P2P "
             "between them); device buffers go through host memory");
    return nullptr;
  }
  // Every rank opens every peer's scratch and the flags before any rank's stream reads them.
  char opened = 1;
  try {
    for (int q = 0; q < n; ++q) {
      world->peers_[q] =
          q == setup.rank
              ? static_cast<std::byte*>(world->scratch_.data())
              : static_cast<std::byte*>(world->imports_.open(offers[q].scratch, offers[q].device));
    }
    if (setup.rank != 0) page = FlagPage::open(page_name, n);
    page->map_for_device();
  } catch (const Error& e) {
    CCL_WARN(kInit, "rank %d: device collectives: %s", setup.rank, e.what());
    opened = 0;
  }
  std::vector<char> answers(n);
  all_gather(&opened, answers.data(), 1);
  if (!all_true(answers)) {
    CCL_INFO(kInit,
             "no device collectives: a rank could not open a peer's scratch or the flags (a "
             "container or sandbox without CUDA IPC?)");
    return nullptr;
  }
  if (setup.rank == 0) page->unlink();  // every rank has mapped it
  world->page_ = std::move(page);
  for (int q = 0; q < n; ++q) {
    world->shares_legacy_stream_ =
        world->shares_legacy_stream_ || (q != setup.rank && offers[q].device == mine.device &&
                                         offers[q].scratch.process == mine.scratch.process);
  }
  DeviceWatchdog::add(world.get());
  CCL_INFO(kInit, "rank %d: device collectives among %d ranks on %s, scratch 2 x %llu bytes",
           setup.rank, n, cuda::peer_link_name(world->link_),
           static_cast<unsigned long long>(setup.half_bytes));
  return world;
}

DeviceWorld::~DeviceWorld() {
  if (page_ != nullptr) {
    // Programs still queued read the scratch and the flags: give them the timeout to finish,
    // then release them (they finish at once), before the memory goes.
    const Deadline until = Deadline::after(timeout_);
    while (check(Clock::now()) && !until.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    DeviceWatchdog::remove(this);
    if (in_flight() > 0) {
      page_->release();
      const Deadline drain = Deadline::after(std::chrono::seconds(2));
      while (check(Clock::now()) && !drain.expired()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    // The peers may still read this rank's scratch for its last programs (they are done here
    // once they published): it stays until every flag it produces is Empty again.
    while (!page_->consumed(rank_) && !page_->released() && !until.expired()) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  // The members close the imports, free the scratch and the stream, each in its own context.
}

bool DeviceWorld::takes(const Call& call) const {
  int device = 0, host = 0;
  auto vote = [&](const void* p) {
    if (p == nullptr) return;
    if (cuda::pointer_kind(p) != MemoryKind::CudaDevice) {
      ++host;
      return;
    }
    ++device;
    if (cuda::context_of(p) != context_) {
      throw_error(cclInvalidArgument,
                  "%s: the device buffer %p is not memory of the communicator's CUDA context "
                  "(the device current when the communicator was made)",
                  call.function, p);
    }
  };
  vote(call.sendbuff);
  if (call.recvbuff != call.sendbuff) vote(call.recvbuff);
  for (std::byte* b : call.buffers()) vote(b);
  if (device > 0 && host > 0) {
    throw_error(cclInvalidArgument,
                "%s: device and host buffers in one call (a communicator runs a call on the "
                "device or on the host, not both)",
                call.function);
  }
  // No buffer to tell (a barrier, a rank with nothing to send or receive): the device, where
  // the ranks' other calls go on a communicator that has a device world.
  return host == 0;
}

void DeviceWorld::enqueue(const algo::device::Program& program, const DeviceBindings& bindings,
                          void* stream) {
  std::lock_guard lock(queue_mutex_);
  {
    std::lock_guard flight(flight_mutex_);
    if (failed_) {
      throw_error(cclRemoteError,
                  "the device collectives of this communicator failed earlier (see the first "
                  "error)");
    }
  }
  // The legacy stream (NULL, CU_STREAM_LEGACY): one per context, so one for all the ranks of
  // this process on this GPU.
  if (shares_legacy_stream_ && reinterpret_cast<uintptr_t>(stream) <= 1) {
    throw_error(cclInvalidUsage,
                "several ranks of this process are on one GPU: they cannot queue their "
                "collectives on its legacy default stream (one rank's would wait behind the "
                "other's); give each rank a CUDA stream of its own");
  }
  cuda::ContextScope scope(context_);
  if (cuda::stream_context(stream) != context_) {
    throw_error(cclInvalidUsage,
                "the CUDA stream %p is not a stream of the communicator's CUDA context (the "
                "device current when the communicator was made)",
                stream);
  }
  const bool capturing = cuda::is_capturing(stream);
  if (capturing) {
    // CUDA forbids allocating during a capture (and it would invalidate the capture): a program
    // that needs a device copy (an in-place alltoallv) uses one an earlier call made, or none.
    if (program.temp_bytes > 0 && (temps_.empty() || temps_.back().size() < program.temp_bytes)) {
      throw_error(cclInvalidUsage,
                  "an in-place alltoallv sends from a device copy of its input (%llu bytes), and "
                  "device memory cannot be allocated during a CUDA graph capture: make the same "
                  "call (or a larger one) once before capturing, which keeps the copy, or give "
                  "it separate send and receive buffers",
                  static_cast<unsigned long long>(program.temp_bytes));
    }
    queue_program(program, bindings, stream, 0);
    return;
  }
  // Every program shares the scratch halves and the flags: one queued on another stream than the
  // previous one waits for it, as NCCL orders a call after the communicator's previous one.
  if (!last_program_) last_program_ = std::make_unique<cuda::Event>();
  if (last_stream_ && *last_stream_ != stream) cuda::stream_wait_event(stream, *last_program_);
  queue_program(program, bindings, stream, track());
  last_program_->record(stream);
  last_stream_ = stream;
  DeviceWatchdog::wake();
}

void DeviceWorld::run(const algo::device::Program& program, const DeviceBindings& bindings) {
  cuda::ContextScope scope(context_);
  void* stream = own_stream_.get(context_);
  cuda::order_after_legacy_stream_on(stream);
  enqueue(program, bindings, stream);
  cuda::Event done;
  done.record(stream);
  const Deadline until = Deadline::after(timeout_);
  for (int polls = 0; !done.done(); ++polls) {
    bool failed = false;
    {
      std::lock_guard flight(flight_mutex_);
      failed = failed_;
    }
    if (failed || until.expired()) {
      if (!failed) {
        fail(cclTimeout,
             "a device collective did not finish within the communicator's timeout "
             "(a peer did not take part: dead, or it called another collective)");
      }
      // Released: what is left of the program runs through at once; let it before returning.
      const Deadline drain = Deadline::after(std::chrono::seconds(2));
      while (!done.done() && !drain.expired()) std::this_thread::yield();
      throw_error(failed ? cclRemoteError : cclTimeout,
                  "a device collective failed: the communicator's device collectives were "
                  "released (see the first error)");
    }
    poll_pause(polls);
  }
  check(Clock::now());  // a release while it ran makes its result untrustworthy
  std::lock_guard flight(flight_mutex_);
  if (failed_) {
    throw_error(cclRemoteError,
                "a device collective ran while the communicator's device collectives were "
                "released (see the first error)");
  }
}

uint32_t DeviceWorld::track() {
  std::lock_guard flight(flight_mutex_);
  if (++issued_ == 0) ++issued_;  // 0 means "no number"
  flight_.push_back({issued_, Clock::now() + timeout_});
  return issued_;
}

void DeviceWorld::fail(cclResult_t code, const std::string& message) {
  {
    std::lock_guard flight(flight_mutex_);
    if (failed_) {
      page_->release();
      return;
    }
    failed_ = true;
  }
  // The failure is recorded before the flags are released: a release lets the waiting streams
  // run through, and a cclStreamSynchronize that sees its stream done then reads the
  // communicator's error (CI once saw cclSuccess there, the release having come first).
  CCL_WARN(kColl, "rank %d: device collectives released: %s", rank_, message.c_str());
  if (on_failure_) on_failure_(code, message);
  page_->release();
}

bool DeviceWorld::check(Clock::time_point now) {
  cclResult_t code = cclSuccess;
  std::string why;
  {
    std::lock_guard flight(flight_mutex_);
    // Released before the programs were seen done: they may have run through on the released
    // flags, so their results are not to be trusted.
    const bool released = page_->released();
    const bool had_flight = !flight_.empty();
    const uint32_t done = page_->done(rank_);
    while (!flight_.empty() && reached(done, flight_.front().number)) flight_.pop_front();
    if (failed_) {
      if (!flight_.empty()) page_->release();  // a later write may have set a flag back
      return !flight_.empty();
    }
    if (released && had_flight) {
      code = cclRemoteError;
      why = "another rank's device collectives failed or were aborted (it released the flags)";
    } else if (flight_.empty()) {
      return false;
    } else if (abort_ != nullptr && abort_->load()) {
      code = cclRemoteError;
      why = "the communicator was aborted";
    } else if (now >= flight_.front().deadline) {
      code = cclTimeout;
      why = "device collective #" + std::to_string(flight_.front().number) +
            " not done within the communicator's timeout: a peer did not take part (dead, or "
            "it called another collective)";
    }
  }
  if (code != cclSuccess) fail(code, why);
  return in_flight() > 0;
}

size_t DeviceWorld::in_flight() const {
  std::lock_guard flight(flight_mutex_);
  return flight_.size();
}

void* DeviceWorld::temp(uint64_t bytes) {
  // Earlier copies stay allocated: a program queued before may still read one.
  if (temps_.empty() || temps_.back().size() < bytes) temps_.emplace_back(bytes);
  return temps_.back().data();
}

}  // namespace ccl
