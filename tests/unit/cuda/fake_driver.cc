#include "fake_driver.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "algorithms/reduce/cuda/cuda_kernel_names.h"
#include "algorithms/reduce/cuda/cuda_launch.h"
#include "algorithms/reduce/reduce.h"
#include "cuda/cuda_driver.h"
#include "cuda/cuda_driver_api.h"

namespace ccl_test::fake_cuda {

// Device memory of the arena on `device`, and the device an address of it is on (-1: not in a
// device allocation of the fake). Defined with device_alloc below.
void* alloc_on(size_t bytes, int device);
int device_of_pointer(uintptr_t p);

namespace {

constexpr size_t kArenaBytes = size_t{1} << 30;  // virtual: the memfd is sparse

// Polls until `ready()`, yielding, then sleeping 20 us. A wait of `limit` would hang a real GPU:
// the fake says which wait it was (`what`) and aborts, so that a test fails instead of hanging.
template <class Ready>
void wait_or_abort(Ready ready, std::chrono::seconds limit, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int polls = 0; !ready(); ++polls) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "fake CUDA: %s\n", what);
      std::abort();
    }
    if (polls < 50) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

// A stream: a queue run in order by a thread of its own. Counts what was queued on it and
// what is done, so that the legacy stream's rule can be kept (blocking_push below).
// A graph being captured, or captured: the work its stream was given, replayed in order.
struct FakeGraph {
  std::vector<std::function<void()>> nodes;
  CaptureMode mode = CaptureMode::Global;
  std::thread::id thread;    // the thread that began the capture
  bool invalidated = false;  // an unsafe call during it: cuStreamEndCapture gives no graph
};

class FakeStream {
 public:
  explicit FakeStream(bool blocking = false, CUcontext context = nullptr)
      : context(context), blocking_(blocking), thread_([this] { loop(); }) {}
  bool blocking() const { return blocking_; }
  const CUcontext context;  // the context current when it was made (none: the legacy stream's)
  // While capturing, work queued on the stream goes into the graph instead of running.
  FakeGraph* capture = nullptr;  // under order_mutex
  uint64_t pushed() const { return pushed_.load(); }
  // Waits (on the caller's stream thread) until the first `n` items queued here are done.
  void wait_done(uint64_t n) const {
    wait_or_abort([&] { return done_.load() >= n; }, std::chrono::seconds(20),
                  "a stream waited 20 s for the legacy stream's order (a deadlock on a real GPU)");
  }
  ~FakeStream() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::function<void()> fn) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(fn));
      pushed_.fetch_add(1);
    }
    cv_.notify_all();
  }
  void drain() {
    std::unique_lock lock(mutex_);
    if (!idle_.wait_for(lock, std::chrono::seconds(60), [&] { return queue_.empty() && !busy_; })) {
      throw std::runtime_error("fake CUDA stream did not drain in 60 s");
    }
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      fn();
      done_.fetch_add(1);
      lock.lock();
      busy_ = false;
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  const bool blocking_;
  std::atomic<uint64_t> pushed_{0}, done_{0};
  std::thread thread_;
};

// An event: the number of records made and of records the stream has passed; a record made
// during a capture is a node of the graph and never passes before the graph runs.
// The state lives as long as a stream's work refers to it: cuEventDestroy of an event a stream
// still has to pass (or to wait for) is legal, and the driver frees it later.
struct EventState {
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> passed{0};
  std::atomic<bool> captured{false};  // the last record was made during a capture
  bool done() const { return passed.load(std::memory_order_acquire) >= recorded.load(); }
};
struct FakeEvent {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

// The arena's first page is shared by every process that maps it (a forked rank): the cursor
// below which memory was handed out, so that two processes never hand out the same bytes.
struct ArenaHeader {
  std::atomic<uint64_t> used;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// Memory of another process opened through CUDA IPC: a mapping of its own (PROT_NONE, as device
// memory) of the arena's pages, at another address than the exporter's.
struct Import {
  uintptr_t map_base = 0;  // the mapping
  size_t map_bytes = 0;
  uint64_t arena_offset = 0;  // of map_base's first byte
  uintptr_t base = 0;         // what cuIpcOpenMemHandle returned
  size_t bytes = 0;
  int device = 0;                // where it is reached from (opened with lazy peer access)
  std::pair<int, uint64_t> key;  // exporter's pid, allocation's arena offset
};

struct State {
  pid_t pid =
      getpid();  // the process this state is of (a forked child renews its per-process part)
  int fd = -1;
  std::byte* device = nullptr;    // PROT_NONE: what device pointers point at
  std::byte* view = nullptr;      // the same bytes, read-write, for the fake's own use
  ArenaHeader* header = nullptr;  // in the arena's first page, in the view
  std::mutex mutex;
  std::map<uintptr_t, size_t> pinned;          // cuMemHostAlloc'd ranges
  std::map<uintptr_t, size_t> allocations;     // device_alloc'd ranges (device addresses)
  std::map<uintptr_t, int> allocation_device;  // the device each allocation is on
  std::atomic<int> launches{0};
  std::atomic<int> ipc_opens{0};
  std::atomic<int> host_waits{0};
  std::map<uintptr_t, size_t> free_blocks;  // device_free'd ranges (offsets in the arena)
  std::map<uintptr_t, Import> imports;      // by base, this process's IPC mappings
  FakeStream* legacy = nullptr;
  std::atomic<bool> refuse_wait_value{false};
  ccl::cuda::DriverApi api;
};

State& state() {
  static State* s = [] {
    auto* st = new State();
    st->fd = memfd_create("ccl-fake-cuda", 0);
    if (st->fd < 0 || ftruncate(st->fd, static_cast<off_t>(kArenaBytes)) != 0) std::abort();
    st->device = static_cast<std::byte*>(
        mmap(nullptr, kArenaBytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, st->fd, 0));
    st->view = static_cast<std::byte*>(
        mmap(nullptr, kArenaBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, st->fd, 0));
    if (st->device == MAP_FAILED || st->view == MAP_FAILED) std::abort();
    st->header = new (st->view) ArenaHeader{};
    st->header->used.store(4096);  // the header's page is never handed out
    st->legacy = new FakeStream();
    return st;
  }();
  // A forked child shares the arena (the memfd, mapped shared) and its cursor, not the parent's
  // threads: it gets a legacy stream of its own, and reuses no block the parent freed.
  if (s->pid != getpid()) {
    std::lock_guard lock(s->mutex);
    if (s->pid != getpid()) {
      s->pid = getpid();
      s->legacy = new FakeStream();  // the parent's one has no thread here (never destroyed)
      s->free_blocks.clear();
      s->imports.clear();  // a child inherits no IPC mapping (CUDA's are per process)
    }
  }
  return *s;
}

// Contexts: one (primary) context per device, with that device's ordinal. A thread has none
// current until it makes one current (cuCtxSetCurrent, or use_device as cudaSetDevice does),
// unless set_default_context(true) gives new threads device 0's.
constexpr int kMaxDevices = 16;
int context_objects[kMaxDevices];
CUcontext fake_context(int device) { return reinterpret_cast<CUcontext>(&context_objects[device]); }
// The device of a context of the fake, -1 for anything else.
int device_of_context(CUcontext context) {
  const auto* p = reinterpret_cast<const int*>(context);
  return p >= context_objects && p < context_objects + kMaxDevices
             ? static_cast<int>(p - context_objects)
             : -1;
}
std::atomic<bool> context_by_default{false};  // set_default_context
thread_local bool context_chosen = false;     // the thread set one (or none) itself
thread_local CUcontext current_context_value = nullptr;
thread_local int thread_device = 0;  // use_device()
CUcontext current_context() {
  if (!context_chosen) {
    context_chosen = true;
    current_context_value = context_by_default.load() ? fake_context(thread_device) : nullptr;
  }
  return current_context_value;
}
void set_current_context(CUcontext context) {
  context_chosen = true;
  current_context_value = context;
}
// The device of the calling thread's current context, -1 without one.
int current_device() { return device_of_context(current_context()); }

// The import containing `p`, nullptr for none. State::mutex held.
const Import* import_at(State& s, uintptr_t p) {
  auto it = s.imports.upper_bound(p);
  if (it == s.imports.begin()) return nullptr;
  --it;
  const Import& i = it->second;
  return p >= i.map_base && p < i.map_base + i.map_bytes ? &i : nullptr;
}

bool is_device(uintptr_t p) {
  State& s = state();
  const auto base = reinterpret_cast<uintptr_t>(s.device);
  if (p >= base && p < base + kArenaBytes) return true;
  std::lock_guard lock(s.mutex);
  return import_at(s, p) != nullptr;
}

bool is_pinned(uintptr_t p) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.pinned.upper_bound(p);
  if (it == s.pinned.begin()) return false;
  --it;
  return p < it->first + it->second;
}

void* host_view(uintptr_t p) {
  State& s = state();
  const auto base = reinterpret_cast<uintptr_t>(s.device);
  if (p >= base && p < base + kArenaBytes) return s.view + (p - base);
  std::lock_guard lock(s.mutex);
  if (const Import* i = import_at(s, p)) return s.view + i->arena_offset + (p - i->map_base);
  return reinterpret_cast<void*>(p);
}

FakeStream* stream_of(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY) return state().legacy;
  return reinterpret_cast<FakeStream*>(stream);
}

// The legacy default stream's rule, as the driver keeps it: work queued on the legacy stream
// waits for the work queued before it on every blocking stream (created without
// CU_STREAM_NON_BLOCKING), and work queued on a blocking stream waits for the work queued before
// it on the legacy stream. Non-blocking streams wait for neither.
std::mutex order_mutex;
std::set<FakeStream*> blocking_streams;

void queue(CUstream handle, std::function<void()> fn) {
  FakeStream* stream = stream_of(handle);
  std::lock_guard lock(order_mutex);
  if (stream->capture != nullptr) {
    stream->capture->nodes.push_back(std::move(fn));
    return;
  }
  std::vector<std::pair<const FakeStream*, uint64_t>> after;
  if (stream == state().legacy) {
    for (FakeStream* b : blocking_streams) after.emplace_back(b, b->pushed());
  } else if (stream->blocking()) {
    after.emplace_back(state().legacy, state().legacy->pushed());
  }
  if (after.empty()) {
    stream->push(std::move(fn));
    return;
  }
  stream->push([after = std::move(after), fn = std::move(fn)] {
    for (const auto& [other, n] : after) other->wait_done(n);
    fn();
  });
}

// The captures under way (under order_mutex), for the calls CUDA calls potentially unsafe during
// a capture: allocation, freeing, pinning and synchronizing. As the driver decides it (for a
// thread in the default global interaction mode): a thread may not make them while it has a
// capture of its own that is not relaxed, nor while another thread has a global capture. Such a
// call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture(s) that
// forbade it.
std::set<FakeGraph*> captures;

CUresult unsafe_call() {
  std::lock_guard lock(order_mutex);
  const std::thread::id me = std::this_thread::get_id();
  bool refused = false;
  for (FakeGraph* g : captures) {
    const bool mine = g->thread == me;
    if ((mine && g->mode != CaptureMode::Relaxed) || (!mine && g->mode == CaptureMode::Global)) {
      g->invalidated = true;
      refused = true;
    }
  }
  return refused ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult get_error_string(CUresult, const char** text) {
  *text = "an error of the fake CUDA driver";
  return CUDA_SUCCESS;
}
CUresult get_error_name(CUresult status, const char** name) {
  *name = status == CUDA_ERROR_NOT_SUPPORTED ? "CUDA_ERROR_NOT_SUPPORTED" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

CUresult pointer_get_attribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  const bool device = is_device(ptr);
  if (!device && !is_pinned(ptr)) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) =
          fake_context(device ? std::max(device_of_pointer(ptr), 0) : 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = device ? std::max(device_of_pointer(ptr), 0) : 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult ctx_get_current(CUcontext* context) {
  *context = current_context();
  return CUDA_SUCCESS;
}
CUresult ctx_set_current(CUcontext context) {
  if (context != nullptr && device_of_context(context) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  set_current_context(context);
  return CUDA_SUCCESS;
}
std::atomic<int> device_count{1};
std::atomic<bool> peer_access{true};

CUresult ctx_get_device(CUdevice* device) {
  const int current = current_device();
  if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *device = current;
  return CUDA_SUCCESS;
}
CUresult device_get_count(int* count) {
  *count = device_count.load();
  return CUDA_SUCCESS;
}
CUresult device_get(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count.load()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult device_get_uuid(CUuuid* uuid, CUdevice device) {
  if (device < 0 || device >= device_count.load()) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(uuid, 0, sizeof(*uuid));
  uuid->bytes[0] = static_cast<char>(0x40 + device);
  return CUDA_SUCCESS;
}
// The bus ids set_bus_ids gave, else "0000:3B:00.0" upwards (CUDA's spelling: upper case).
std::mutex bus_ids_mutex;
std::vector<std::string> bus_ids;
CUresult device_get_pci_bus_id(char* out, int len, CUdevice device) {
  if (device < 0 || device >= device_count.load() || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(bus_ids_mutex);
  char name[32];
  if (static_cast<size_t>(device) < bus_ids.size()) {
    std::snprintf(name, sizeof(name), "%s", bus_ids[static_cast<size_t>(device)].c_str());
  } else {
    std::snprintf(name, sizeof(name), "0000:%02X:00.0", 0x3B + device);
  }
  std::snprintf(out, static_cast<size_t>(len), "%s", name);
  return CUDA_SUCCESS;
}
CUresult device_can_access_peer(int* can, CUdevice device, CUdevice peer) {
  const int n = device_count.load();
  if (device < 0 || device >= n || peer < 0 || peer >= n) return CUDA_ERROR_INVALID_DEVICE;
  *can = device != peer && peer_access.load() ? 1 : 0;
  return CUDA_SUCCESS;
}
std::atomic<bool> nvlink{true};
CUresult device_get_p2p_attribute(int* value, CUdevice_P2PAttribute attribute, CUdevice device,
                                  CUdevice peer) {
  const int n = device_count.load();
  if (device < 0 || device >= n || peer < 0 || peer >= n || device == peer) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  switch (attribute) {
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
      *value = peer_access.load() ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
      *value = peer_access.load() && nvlink.load() ? 1 : 0;
      return CUDA_SUCCESS;
    default:
      *value = 0;
      return CUDA_SUCCESS;
  }
}
std::atomic<int> peer_enables{0};
// As the driver: from the current context's device to the peer context's; refused where the
// devices have no P2P; "already enabled" the second time for a pair.
std::mutex peer_mutex;
std::set<std::pair<int, int>> peers_enabled;
std::atomic<bool> refuse_peer_enable{false};
CUresult ctx_enable_peer_access(CUcontext peer, unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const int from = current_device(), to = device_of_context(peer);
  if (from < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (to < 0) return CUDA_ERROR_INVALID_VALUE;
  if (from == to) return CUDA_ERROR_INVALID_DEVICE;
  if (!peer_access.load() || refuse_peer_enable.load()) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  std::lock_guard lock(peer_mutex);
  if (!peers_enabled.insert({from, to}).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  ++peer_enables;
  return CUDA_SUCCESS;
}
// Whether a kernel on `from` may touch memory of `to`: the same device, or peer access enabled.
bool may_access(int from, int to) {
  if (from == to || to < 0) return true;
  std::lock_guard lock(peer_mutex);
  return peers_enabled.contains({from, to});
}
CUresult primary_ctx_retain(CUcontext* context, CUdevice device) {
  if (device < 0 || device >= device_count.load()) return CUDA_ERROR_INVALID_DEVICE;
  *context = fake_context(device);
  return CUDA_SUCCESS;
}
CUresult device_get_attribute(int* value, CUdevice_attribute, CUdevice) {
  *value = 1;
  return CUDA_SUCCESS;
}
// The legacy stream is the current context's; a stream made by cuStreamCreate, its maker's.
CUresult stream_get_ctx(CUstream stream, CUcontext* context) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY) {
    *context = current_context();
    return *context != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  }
  *context = reinterpret_cast<FakeStream*>(stream)->context;
  return CUDA_SUCCESS;
}
// The context work on `stream` runs in, nullptr for the legacy stream of a thread without one.
CUcontext context_of_stream(CUstream stream) {
  CUcontext context = nullptr;
  stream_get_ctx(stream, &context);
  return context;
}
CUresult stream_create(CUstream* stream, unsigned int flags) {
  if (current_context() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const bool blocking = (flags & CU_STREAM_NON_BLOCKING) == 0;
  auto* created = new FakeStream(blocking, current_context());
  if (blocking) {
    std::lock_guard lock(order_mutex);
    blocking_streams.insert(created);
  }
  *stream = reinterpret_cast<CUstream>(created);
  return CUDA_SUCCESS;
}
CUresult stream_destroy(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard lock(order_mutex);
    blocking_streams.erase(reinterpret_cast<FakeStream*>(stream));
  }
  delete reinterpret_cast<FakeStream*>(stream);
  return CUDA_SUCCESS;
}
CUresult stream_synchronize(CUstream stream) {
  if (const CUresult capture = unsafe_call(); capture != CUDA_SUCCESS) return capture;
  state().host_waits.fetch_add(1);
  {
    std::lock_guard lock(order_mutex);
    if (stream_of(stream)->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  stream_of(stream)->drain();
  return CUDA_SUCCESS;
}

// What a stream memory operation's wait compares, as CU_STREAM_WAIT_VALUE_* define it.
bool wait_satisfied(uint32_t word, uint32_t value, unsigned int flags) {
  switch (flags & 0x3u) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      return static_cast<int32_t>(word - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return word == value;
    case CU_STREAM_WAIT_VALUE_AND:
      return (word & value) != 0;
    default:  // NOR
      return ~(word | value) != 0;
  }
}

// A word a stream memory operation waits on or writes, and (in a ThreadSanitizer build) the
// sync object that stands for it. A wait that sees a write happens after it, as on a GPU; but the
// flag words are in a shared-memory page that each rank maps at its own address, which TSan
// cannot tell is one word: the fake names each word by the file and offset it maps, and tells
// TSan of a release on that name at each write and an acquire at each wait that passed.
struct Word {
  std::atomic<uint32_t>* at = nullptr;
  void* sync = nullptr;
};

#if defined(__SANITIZE_THREAD__)
// The file and offset of registered host memory, by the registration's start (the flag pages:
// shared memory), read from /proc/self/maps when it is registered. Under State::mutex.
std::map<uintptr_t, std::pair<uint64_t, uint64_t>> registered_names;

std::pair<uint64_t, uint64_t> mapped_name(uintptr_t p) {
  std::pair<uint64_t, uint64_t> found{0, p};
  if (FILE* maps = std::fopen("/proc/self/maps", "r")) {
    unsigned long start = 0, end = 0, offset = 0, inode = 0;
    char line[512];
    while (std::fgets(line, sizeof(line), maps) != nullptr) {
      if (std::sscanf(line, "%lx-%lx %*s %lx %*s %lu", &start, &end, &offset, &inode) == 4 &&
          p >= start && p < end && inode != 0) {
        found = {inode, offset + (p - start)};
        break;
      }
    }
    std::fclose(maps);
  }
  return found;
}

// The sync object of the word at `addr`: named by its place in the arena, or in the file a
// registered range maps, or else by its address.
void* sync_object(CUdeviceptr addr) {
  static std::mutex objects_mutex;
  static std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<char>> objects;
  std::pair<uint64_t, uint64_t> name{0, addr};
  State& s = state();
  const auto arena = reinterpret_cast<uintptr_t>(s.device);
  if (addr >= arena && addr < arena + kArenaBytes) {
    name = {1, addr - arena};
  } else {
    std::lock_guard lock(s.mutex);
    auto it = registered_names.upper_bound(addr);
    if (it != registered_names.begin()) {
      --it;
      const auto range = s.pinned.find(it->first);
      if (it->second.first != 0 && range != s.pinned.end() && addr < it->first + range->second) {
        name = {it->second.first, it->second.second + (addr - it->first)};
      }
    }
  }
  std::lock_guard lock(objects_mutex);
  std::unique_ptr<char>& object = objects[name];
  if (!object) object = std::make_unique<char>();
  return object.get();
}
#else
void* sync_object(CUdeviceptr) { return nullptr; }
#endif

void release(const Word& w, uint32_t value) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(w.sync);
#endif
  w.at->store(value, std::memory_order_release);
}

// The stream waits on a word of memory, as the GPU's front end does: no host thread is asked.
// A wait that lasts 60 s would hang a real GPU: the fake says so and aborts.
void wait_on_word(const Word& w, uint32_t value, unsigned int flags) {
  wait_or_abort([&] { return wait_satisfied(w.at->load(std::memory_order_acquire), value, flags); },
                std::chrono::seconds(60),
                "a stream waited 60 s on a memory word: a hang on a real GPU");
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(w.sync);
#endif
}

Word word_at(CUdeviceptr addr) {
  return {static_cast<std::atomic<uint32_t>*>(host_view(addr)), sync_object(addr)};
}

// Memory operations reach device memory and host memory registered or pinned for the device.
bool mem_op_address(CUdeviceptr addr) {
  return addr % 4 == 0 && (is_device(addr) || is_pinned(addr));
}

std::atomic<int> mem_ops{0};

CUresult stream_wait_value32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                             unsigned int flags) {
  if (state().refuse_wait_value.load()) return CUDA_ERROR_NOT_SUPPORTED;
  if (!mem_op_address(addr)) return CUDA_ERROR_INVALID_VALUE;
  mem_ops.fetch_add(1);
  const Word word = word_at(addr);
  queue(stream, [word, value, flags] { wait_on_word(word, value, flags); });
  return CUDA_SUCCESS;
}
CUresult stream_write_value32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                              unsigned int flags) {
  if (flags != 0 || !mem_op_address(addr)) return CUDA_ERROR_INVALID_VALUE;
  mem_ops.fetch_add(1);
  const Word word = word_at(addr);
  queue(stream, [word, value] { release(word, value); });
  return CUDA_SUCCESS;
}
// The operations of a batch run in order, as one piece of the stream's work. At most 256, as the
// driver documents.
CUresult stream_batch_mem_op(CUstream stream, unsigned int count, CUstreamBatchMemOpParams* ops,
                             unsigned int flags) {
  if (state().refuse_wait_value.load()) return CUDA_ERROR_NOT_SUPPORTED;
  if (flags != 0 || count == 0 || count > 256 || ops == nullptr) return CUDA_ERROR_INVALID_VALUE;
  struct One {
    bool wait;
    Word word;
    uint32_t value;
    unsigned int flags;
  };
  std::vector<One> batch;
  for (unsigned int i = 0; i < count; ++i) {
    const CUstreamBatchMemOpParams& op = ops[i];
    if (op.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32) {
      if (!mem_op_address(op.waitValue.address)) return CUDA_ERROR_INVALID_VALUE;
      batch.push_back(
          {true, word_at(op.waitValue.address), op.waitValue.value, op.waitValue.flags});
    } else if (op.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32) {
      if (!mem_op_address(op.writeValue.address) || op.writeValue.flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      batch.push_back({false, word_at(op.writeValue.address), op.writeValue.value, 0});
    } else {
      return CUDA_ERROR_NOT_SUPPORTED;  // ccl uses 32-bit waits and writes only
    }
  }
  mem_ops.fetch_add(1);
  queue(stream, [batch = std::move(batch)] {
    for (const One& one : batch) {
      if (one.wait) {
        wait_on_word(one.word, one.value, one.flags);
      } else {
        release(one.word, one.value);
      }
    }
  });
  return CUDA_SUCCESS;
}
// Host functions: as CUDA runs them, on one thread of the process for every stream, one at a
// time; the stream waits until its function returned. A host function that waits for another
// stream's host function therefore waits forever, on a real GPU as here (the fake aborts after
// 60 s, saying so).
class HostCallbacks {
 public:
  // The process's one (a forked child makes its own: its parent's thread is not in it). Never
  // destroyed: streams may outlive statics.
  static HostCallbacks& get() {
    static std::mutex made;
    static HostCallbacks* one = nullptr;
    std::lock_guard lock(made);
    if (one == nullptr || one->pid_ != getpid()) one = new HostCallbacks;
    return *one;
  }
  void run(CUhostFn fn, void* data) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    {
      std::lock_guard lock(mutex_);
      queue_.push_back([fn, data, done] {
        fn(data);
        done->store(true, std::memory_order_release);
      });
    }
    cv_.notify_one();
    wait_or_abort([&] { return done->load(std::memory_order_acquire); }, std::chrono::seconds(60),
                  "a stream waited 60 s for its host function: the process's one host-callback "
                  "thread was busy with another (a deadlock on a real GPU)");
  }

 private:
  HostCallbacks() {
    std::thread([this] {
      std::unique_lock lock(mutex_);
      for (;;) {
        cv_.wait(lock, [&] { return !queue_.empty(); });
        std::function<void()> fn = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        fn();
        lock.lock();
      }
    }).detach();
  }
  const pid_t pid_ = getpid();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

CUresult launch_host_func(CUstream stream, CUhostFn fn, void* data) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  queue(stream, [fn, data] { HostCallbacks::get().run(fn, data); });
  return CUDA_SUCCESS;
}
CUresult event_create(CUevent* event, unsigned int) {
  if (current_context() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *event = reinterpret_cast<CUevent>(new FakeEvent());
  return CUDA_SUCCESS;
}
CUresult event_destroy(CUevent event) {
  delete reinterpret_cast<FakeEvent*>(event);
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent event, CUstream stream) {
  std::shared_ptr<EventState> e = reinterpret_cast<FakeEvent*>(event)->state;
  bool capturing = false;
  {
    std::lock_guard lock(order_mutex);
    capturing = stream_of(stream)->capture != nullptr;
  }
  const uint64_t n = e->recorded.fetch_add(1) + 1;
  e->captured.store(capturing);
  queue(stream, [e, n] {
    uint64_t seen = e->passed.load();
    while (seen < n && !e->passed.compare_exchange_weak(seen, n)) {
    }
  });
  return CUDA_SUCCESS;
}
CUresult event_query(CUevent event) {
  state().host_waits.fetch_add(1);
  const EventState& e = *reinterpret_cast<FakeEvent*>(event)->state;
  // What a record made during a capture marks runs only when the graph runs.
  if (e.captured.load() && !e.done()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return e.done() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
// The stream waits for what the event's latest record marks (at the time of this call).
CUresult stream_wait_event(CUstream stream, CUevent event, unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<EventState> e = reinterpret_cast<FakeEvent*>(event)->state;
  const uint64_t n = e->recorded.load();
  queue(stream, [e, n] {
    wait_or_abort([&] { return e->passed.load(std::memory_order_acquire) >= n; },
                  std::chrono::seconds(60), "a stream waited 60 s for an event (a hang)");
  });
  return CUDA_SUCCESS;
}
CUresult stream_is_capturing(CUstream stream, CUstreamCaptureStatus* status) {
  std::lock_guard lock(order_mutex);
  *status = stream_of(stream)->capture != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                  : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult mem_alloc(CUdeviceptr* ptr, size_t bytes) {
  if (current_context() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (const CUresult capture = unsafe_call(); capture != CUDA_SUCCESS) return capture;
  *ptr = reinterpret_cast<CUdeviceptr>(alloc_on(bytes, current_device()));
  return CUDA_SUCCESS;
}
CUresult mem_free(CUdeviceptr ptr) {
  if (const CUresult capture = unsafe_call(); capture != CUDA_SUCCESS) return capture;
  device_free(reinterpret_cast<void*>(ptr));
  return CUDA_SUCCESS;
}
CUresult mem_host_alloc(void** p, size_t bytes, unsigned int) {
  if (current_context() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (const CUresult capture = unsafe_call(); capture != CUDA_SUCCESS) return capture;
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (*p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.pinned[reinterpret_cast<uintptr_t>(*p)] = bytes;
  return CUDA_SUCCESS;
}
CUresult mem_free_host(void* p) {
  if (const CUresult capture = unsafe_call(); capture != CUDA_SUCCESS) return capture;
  State& s = state();
  {
    std::lock_guard lock(s.mutex);
    s.pinned.erase(reinterpret_cast<uintptr_t>(p));
  }
  std::free(p);
  return CUDA_SUCCESS;
}
// Registered host memory is pinned memory the fake does not own (the flag page of shared memory).
std::map<uintptr_t, size_t> registered;  // under State::mutex
CUresult mem_host_register(void* p, size_t bytes, unsigned int) {
  if (current_context() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (const CUresult capture = unsafe_call(); capture != CUDA_SUCCESS) return capture;
  State& s = state();
  std::lock_guard lock(s.mutex);
  const auto at = reinterpret_cast<uintptr_t>(p);
  if (s.pinned.contains(at)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  s.pinned[at] = bytes;
  registered[at] = bytes;
#if defined(__SANITIZE_THREAD__)
  registered_names[at] = mapped_name(at);
#endif
  return CUDA_SUCCESS;
}
CUresult mem_host_unregister(void* p) {
  if (const CUresult capture = unsafe_call(); capture != CUDA_SUCCESS) return capture;
  State& s = state();
  std::lock_guard lock(s.mutex);
  const auto at = reinterpret_cast<uintptr_t>(p);
  if (!registered.erase(at)) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
#if defined(__SANITIZE_THREAD__)
  registered_names.erase(at);
#endif
  s.pinned.erase(at);
  return CUDA_SUCCESS;
}
CUresult mem_host_get_device_pointer(CUdeviceptr* device, void* host, unsigned int) {
  *device = reinterpret_cast<CUdeviceptr>(host);  // unified addressing
  return CUDA_SUCCESS;
}
// Between devices too, without peer access (the driver stages such a copy, as cudaMemcpyPeer).
CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (context_of_stream(stream) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  void* to = host_view(dst);
  const void* from = host_view(src);
  queue(stream, [to, from, bytes] { std::memcpy(to, from, bytes); });
  return CUDA_SUCCESS;
}

// Modules and kernels: a module is loaded into the current context (one per device here), and a
// function handle is its device << 16 | 1 + the kernel's index in cuda_kernel_names.h. A launch
// runs the CPU kernel of the same name on the stream's thread, over host aliases, in the
// function's context: the stream must be of that context, and every device pointer it is given
// on its device or on a device it has peer access to (a real GPU would fault).
int module_objects[kMaxDevices];
CUresult module_load_data(CUmodule* module, const void* image) {
  const int device = current_device();
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (image == nullptr) return CUDA_ERROR_INVALID_IMAGE;
  *module = reinterpret_cast<CUmodule>(&module_objects[device]);
  return CUDA_SUCCESS;
}
CUresult module_get_function(CUfunction* fn, CUmodule module, const char* name) {
  const auto* m = reinterpret_cast<const int*>(module);
  if (m < module_objects || m >= module_objects + kMaxDevices) return CUDA_ERROR_INVALID_HANDLE;
  const auto device = static_cast<uintptr_t>(m - module_objects);
  for (int i = 0; i < ccl::reduce::cuda::kNumKernels; ++i) {
    if (std::strcmp(ccl::reduce::cuda::kernel_name_at(i), name) == 0) {
      *fn = reinterpret_cast<CUfunction>(device << 16 | static_cast<uintptr_t>(i + 1));
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}
CUresult launch_kernel(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                       unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared,
                       CUstream stream, void** params, void** extra) {
  namespace k = ccl::reduce::cuda;
  if (grid_x == 0 || grid_y != 1 || grid_z != 1 || block_x != k::kThreadsPerBlock || block_y != 1 ||
      block_z != 1 || shared != 0 || extra != nullptr || params == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto handle = reinterpret_cast<uintptr_t>(fn);
  const int device = static_cast<int>(handle >> 16);
  const int index = static_cast<int>(handle & 0xffff) - 1;
  if (index < 0 || index >= k::kNumKernels || device >= kMaxDevices)
    return CUDA_ERROR_INVALID_HANDLE;
  if (context_of_stream(stream) != fake_context(device)) return CUDA_ERROR_INVALID_CONTEXT;
  // The memory the kernel touches: its pointers are among its first three parameters (every
  // kernel below has three or more; a count there is never an address of the arena).
  for (int i = 0; i < 3; ++i) {
    const uintptr_t p = *static_cast<uintptr_t*>(params[i]);
    if (is_device(p) && !may_access(device, device_of_pointer(p)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  const int reduce_kernels = cclNumTypes * k::kNumBaseOps;
  state().launches.fetch_add(1);
  if (index >= 0 && index < reduce_kernels) {
    auto type = static_cast<cclDataType_t>(index / k::kNumBaseOps);
    auto op = static_cast<cclRedOp_t>(index % k::kNumBaseOps);
    void* dst = host_view(*static_cast<uintptr_t*>(params[0]));
    const void* a = host_view(*static_cast<uintptr_t*>(params[1]));
    const void* b = host_view(*static_cast<uintptr_t*>(params[2]));
    const auto count = *static_cast<unsigned long long*>(params[3]);
    queue(stream, [=] { ccl::reduce::reduce_kernel(type, op)(dst, a, b, count); });
    return CUDA_SUCCESS;
  }
  if (index >= reduce_kernels && index < reduce_kernels + cclNumTypes) {
    auto type = static_cast<cclDataType_t>(index - reduce_kernels);
    void* data = host_view(*static_cast<uintptr_t*>(params[0]));
    const auto count = *static_cast<unsigned long long*>(params[1]);
    const auto divisor = *static_cast<unsigned long long*>(params[2]);
    queue(stream, [=] { ccl::reduce::divide_kernel(type)(data, count, divisor); });
    return CUDA_SUCCESS;
  }
  if (index >= reduce_kernels + cclNumTypes && index < reduce_kernels + 2 * cclNumTypes) {
    auto type = static_cast<cclDataType_t>(index - reduce_kernels - cclNumTypes);
    void* dst = host_view(*static_cast<uintptr_t*>(params[0]));
    const void* src = host_view(*static_cast<uintptr_t*>(params[1]));
    const auto count = *static_cast<unsigned long long*>(params[2]);
    const auto bits = *static_cast<unsigned long long*>(params[3]);  // read now, as by value
    queue(stream, [=] { ccl::reduce::scale_kernel(type)(dst, src, count, &bits); });
    return CUDA_SUCCESS;
  }
  if (index == k::copy_kernel_index()) {
    void* dst = host_view(*static_cast<uintptr_t*>(params[0]));
    const void* src = host_view(*static_cast<uintptr_t*>(params[1]));
    const auto bytes = *static_cast<unsigned long long*>(params[2]);
    queue(stream, [=] { std::memmove(dst, src, bytes); });
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

// IPC: a handle holds the allocation's offset in the arena; opening it gives the same address
// (one arena per process; ccl opens no handle of its own process, so tests pass another pid).
CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (const Import* i = import_at(s, ptr)) {
    *base = i->base;
    *size = i->bytes;
    return CUDA_SUCCESS;
  }
  auto it = s.allocations.upper_bound(ptr);
  if (it == s.allocations.begin()) return CUDA_ERROR_NOT_FOUND;
  --it;
  if (ptr >= it->first + std::max<size_t>(it->second, 1)) return CUDA_ERROR_NOT_FOUND;
  *base = it->first;
  *size = it->second;
  return CUDA_SUCCESS;
}
// A dmabuf of a page-aligned range inside one allocation: a descriptor of the arena's memfd (a
// NIC mock only checks that it is live).
std::atomic<int> dmabuf_exports{0};
CUresult mem_get_handle_for_address_range(void* handle, CUdeviceptr ptr, size_t size,
                                          CUmemRangeHandleType type, unsigned long long flags) {
  if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags != 0 || ptr % 4096 != 0 ||
      size % 4096 != 0 || size == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdeviceptr base = 0;
  size_t bytes = 0;
  if (mem_get_address_range(&base, &bytes, ptr) != CUDA_SUCCESS || ptr + size > base + bytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *static_cast<int*>(handle) = dup(state().fd);
  dmabuf_exports.fetch_add(1);
  return CUDA_SUCCESS;
}
// IPC as CUDA has it between processes: a handle names an allocation (its start) of the exporting
// process; another process opens it once (a second open before the close is refused), at an
// address of its own (a new mapping of the arena's pages: the exporter's address means nothing
// there), and closing it unmaps it (a later access faults). A process cannot open its own
// handles, and a handle that names no allocation, or a malformed one, is refused.
struct FakeIpcHandle {
  uint32_t magic;
  int32_t pid;      // the exporter
  uint64_t offset;  // the allocation's, in the arena
  uint64_t bytes;
  int32_t device;
};
static_assert(sizeof(FakeIpcHandle) <= sizeof(CUipcMemHandle));
constexpr uint32_t kIpcMagic = 0x43435046;  // "FPCC"

CUresult ipc_get_mem_handle(CUipcMemHandle* handle, CUdeviceptr base) {
  if (current_context() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  State& s = state();
  std::lock_guard lock(s.mutex);
  const auto arena = reinterpret_cast<uintptr_t>(s.device);
  auto it = s.allocations.find(base);
  if (it == s.allocations.end() || base < arena || base >= arena + kArenaBytes) {
    return CUDA_ERROR_INVALID_VALUE;  // not the start of an allocation of this process
  }
  FakeIpcHandle h{kIpcMagic, static_cast<int32_t>(getpid()), base - arena, it->second,
                  s.allocation_device[base]};
  std::memset(handle, 0, sizeof(*handle));
  std::memcpy(handle->reserved, &h, sizeof(h));
  return CUDA_SUCCESS;
}
CUresult ipc_open_mem_handle(CUdeviceptr* base, CUipcMemHandle handle, unsigned int flags) {
  const int device = current_device();
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if ((flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0) return CUDA_ERROR_INVALID_VALUE;
  FakeIpcHandle h;
  std::memcpy(&h, handle.reserved, sizeof(h));
  if (h.magic != kIpcMagic || h.offset < 4096 || h.offset >= kArenaBytes ||
      h.bytes > kArenaBytes - h.offset) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (h.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;  // its own memory: CUDA refuses
  // Lazy peer access reaches the exporter's device; without it, that device must be a peer.
  if (h.device != device && (flags & CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == 0 &&
      !may_access(device, h.device)) {
    return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  }
  State& s = state();
  std::lock_guard lock(s.mutex);
  const std::pair<int, uint64_t> key{h.pid, h.offset};
  for (const auto& [at, i] : s.imports) {
    if (i.key == key) return CUDA_ERROR_ALREADY_MAPPED;
  }
  const uint64_t page = h.offset / 4096 * 4096;
  const size_t map_bytes = (h.offset + std::max<uint64_t>(h.bytes, 1) - page + 4095) / 4096 * 4096;
  void* mapped = mmap(nullptr, map_bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, s.fd,
                      static_cast<off_t>(page));
  if (mapped == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Import i;
  i.map_base = reinterpret_cast<uintptr_t>(mapped);
  i.map_bytes = map_bytes;
  i.arena_offset = page;
  i.base = i.map_base + (h.offset - page);
  i.bytes = h.bytes;
  i.device = device;  // reached from here (lazily enabled peer access, or a peer)
  i.key = key;
  s.imports[i.map_base] = i;
  s.ipc_opens.fetch_add(1);
  *base = i.base;
  return CUDA_SUCCESS;
}
CUresult ipc_close_mem_handle(CUdeviceptr base) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  for (auto it = s.imports.begin(); it != s.imports.end(); ++it) {
    if (it->second.base == base) {
      munmap(reinterpret_cast<void*>(it->second.map_base), it->second.map_bytes);
      s.imports.erase(it);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;  // not an address cuIpcOpenMemHandle gave
}

}  // namespace

void install() {
  State& s = state();
  ccl::cuda::DriverApi& api = s.api;
  api.driver_version = 13000;
  api.get_error_string = get_error_string;
  api.get_error_name = get_error_name;
  api.pointer_get_attribute = pointer_get_attribute;
  api.ctx_get_current = ctx_get_current;
  api.ctx_set_current = ctx_set_current;
  api.ctx_get_device = ctx_get_device;
  api.primary_ctx_retain = primary_ctx_retain;
  api.device_get_attribute = device_get_attribute;
  api.device_get_count = device_get_count;
  api.device_get = device_get;
  api.device_get_uuid = device_get_uuid;
  api.device_get_pci_bus_id = device_get_pci_bus_id;
  api.device_can_access_peer = device_can_access_peer;
  api.device_get_p2p_attribute = device_get_p2p_attribute;
  api.ctx_enable_peer_access = ctx_enable_peer_access;
  device_count.store(1);
  peer_access.store(true);
  nvlink.store(true);
  refuse_peer_enable.store(false);
  {
    std::lock_guard lock(bus_ids_mutex);
    bus_ids.clear();
  }
  api.stream_get_ctx = stream_get_ctx;
  api.stream_create = stream_create;
  api.stream_destroy = stream_destroy;
  api.stream_synchronize = stream_synchronize;
  api.stream_wait_value32 = stream_wait_value32;
  api.stream_write_value32 = stream_write_value32;
  api.stream_batch_mem_op = stream_batch_mem_op;
  api.stream_wait_event = stream_wait_event;
  api.stream_is_capturing = stream_is_capturing;
  api.launch_host_func = launch_host_func;
  api.event_create = event_create;
  api.event_destroy = event_destroy;
  api.event_record = event_record;
  api.event_query = event_query;
  api.mem_alloc = mem_alloc;
  api.mem_free = mem_free;
  api.mem_host_alloc = mem_host_alloc;
  api.mem_free_host = mem_free_host;
  api.mem_host_get_device_pointer = mem_host_get_device_pointer;
  api.mem_host_register = mem_host_register;
  api.mem_host_unregister = mem_host_unregister;
  api.memcpy_async = memcpy_async;
  api.module_load_data = module_load_data;
  api.module_get_function = module_get_function;
  api.launch_kernel = launch_kernel;
  api.mem_get_address_range = mem_get_address_range;
  api.ipc_get_mem_handle = ipc_get_mem_handle;
  api.mem_get_handle_for_address_range = mem_get_handle_for_address_range;
  api.ipc_open_mem_handle = ipc_open_mem_handle;
  api.ipc_close_mem_handle = ipc_close_mem_handle;
  ccl::cuda::set_cuda_driver_for_testing(&api);
}

void uninstall() { ccl::cuda::set_cuda_driver_for_testing(nullptr); }

void set_devices(int count, bool p2p, bool nvlink_between) {
  device_count.store(count);
  peer_access.store(p2p);
  nvlink.store(nvlink_between);
}

void set_bus_ids(const std::vector<std::string>& ids) {
  std::lock_guard lock(bus_ids_mutex);
  bus_ids = ids;
  device_count.store(static_cast<int>(ids.size()));
}

// As cudaSetDevice: the device's primary context becomes current, where the thread has one or
// new threads get one (set_default_context).
void use_device(int device) {
  thread_device = device;
  if (context_by_default.load() || current_context() != nullptr) {
    set_current_context(fake_context(device));
  }
}

void refuse_stream_wait_value(bool refuse) { state().refuse_wait_value.store(refuse); }

// First fit from the freed blocks, else the end of the arena; a freed block gives its pages
// back (the memfd is sparse) and merges with its free neighbours.
void* device_alloc(size_t bytes) {
  return alloc_on(bytes, current_device() >= 0 ? current_device() : thread_device);
}

int device_of_pointer(uintptr_t p) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (const Import* i = import_at(s, p)) return i->device;
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin()) return -1;
  --it;
  if (p >= it->first + std::max<size_t>(it->second, 1)) return -1;
  return s.allocation_device[it->first];
}

void* alloc_on(size_t bytes, int device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  // 256-byte aligned, whole pages from a page on (what a dmabuf export needs).
  const size_t align = bytes >= 4096 ? 4096 : 256;
  const size_t want = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  size_t at = SIZE_MAX;
  for (auto it = s.free_blocks.begin(); it != s.free_blocks.end(); ++it) {
    if (it->second < want || it->first % align != 0) continue;
    at = it->first;
    const size_t left = it->second - want;
    s.free_blocks.erase(it);
    if (left > 0) s.free_blocks[at + want] = left;
    break;
  }
  if (at == SIZE_MAX) {
    uint64_t used = s.header->used.load();
    do {
      at = (used + align - 1) / align * align;
      if (at + want > kArenaBytes) throw std::runtime_error("fake CUDA device memory exhausted");
    } while (!s.header->used.compare_exchange_weak(used, at + want));
  }
  s.allocations[reinterpret_cast<uintptr_t>(s.device + at)] = bytes;
  s.allocation_device[reinterpret_cast<uintptr_t>(s.device + at)] = device;
  return s.device + at;
}

void device_free(void* p) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == s.allocations.end()) return;
  size_t at = reinterpret_cast<std::byte*>(p) - s.device;
  const size_t align = it->second >= 4096 ? 4096 : 256;  // as device_alloc rounded it
  size_t size = (std::max<size_t>(it->second, 1) + align - 1) / align * align;
  s.allocation_device.erase(it->first);
  s.allocations.erase(it);
  // Gives back the whole pages of the block only: a page it shares with a live neighbour is
  // written by that neighbour's users meanwhile (tmpfs unmaps the pages it punches).
  const size_t first_page = (at + 4095) / 4096 * 4096, end_page = (at + size) / 4096 * 4096;
  if (end_page >= first_page + 65536) {
    fallocate(s.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first_page),
              static_cast<off_t>(end_page - first_page));
  }
  auto next = s.free_blocks.find(at + size);
  if (next != s.free_blocks.end()) {
    size += next->second;
    s.free_blocks.erase(next);
  }
  auto prev = s.free_blocks.lower_bound(at);
  if (prev != s.free_blocks.begin()) {
    --prev;
    if (prev->first + prev->second == at) {
      at = prev->first;
      size += prev->second;
      s.free_blocks.erase(prev);
    }
  }
  s.free_blocks[at] = size;
}

void to_device(void* device_dst, const void* host_src, size_t bytes) {
  std::memcpy(host_view(reinterpret_cast<uintptr_t>(device_dst)), host_src, bytes);
}

void from_device(void* host_dst, const void* device_src, size_t bytes) {
  std::memcpy(host_dst, host_view(reinterpret_cast<uintptr_t>(device_src)), bytes);
}

// A test's stream, on the thread's current context or its chosen device's.
CUstream_st* create_stream(bool blocking) {
  CUcontext context =
      current_context() != nullptr ? current_context() : fake_context(thread_device);
  auto* created = new FakeStream(blocking, context);
  if (blocking) {
    std::lock_guard lock(order_mutex);
    blocking_streams.insert(created);
  }
  return reinterpret_cast<CUstream>(created);
}
void destroy_stream(CUstream_st* stream) { stream_destroy(stream); }
void launch(CUstream_st* stream, std::function<void()> fn) { queue(stream, std::move(fn)); }
void synchronize(CUstream_st* stream) { stream_of(stream)->drain(); }
int kernel_launches() { return state().launches.load(); }
int peer_access_enables() { return peer_enables.load(); }
void refuse_peer_access_enable(bool refuse) { refuse_peer_enable.store(refuse); }
int ipc_opens() { return state().ipc_opens.load(); }
int host_waits() { return state().host_waits.load(); }
int dmabuf_export_count() { return dmabuf_exports.load(); }
int mem_op_calls() { return mem_ops.load(); }
void set_default_context(bool current) { context_by_default.store(current); }
void make_context_current() { set_current_context(fake_context(thread_device)); }

Gate::Gate(CUstream_st* stream) : open_(std::make_shared<std::atomic<bool>>(false)) {
  queue(stream, [open = open_] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!open->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
}
Gate::~Gate() { open(); }
void Gate::open() { open_->store(true, std::memory_order_release); }

void begin_capture(CUstream_st* stream, CaptureMode mode) {
  std::lock_guard lock(order_mutex);
  FakeStream* s = stream_of(stream);
  if (s->capture != nullptr) return;
  s->capture = new FakeGraph();
  s->capture->mode = mode;
  s->capture->thread = std::this_thread::get_id();
  captures.insert(s->capture);
}
Graph* end_capture(CUstream_st* stream) {
  std::lock_guard lock(order_mutex);
  FakeStream* s = stream_of(stream);
  FakeGraph* graph = std::exchange(s->capture, nullptr);
  if (graph == nullptr) return nullptr;
  captures.erase(graph);
  if (graph->invalidated) {
    delete graph;
    return nullptr;
  }
  return reinterpret_cast<Graph*>(graph);
}
size_t graph_nodes(const Graph* graph) {
  return reinterpret_cast<const FakeGraph*>(graph)->nodes.size();
}
void launch_graph(const Graph* graph, CUstream_st* stream) {
  for (const auto& node : reinterpret_cast<const FakeGraph*>(graph)->nodes) queue(stream, node);
}
void destroy_graph(Graph* graph) { delete reinterpret_cast<FakeGraph*>(graph); }
void* alias(const void* device_ptr) { return host_view(reinterpret_cast<uintptr_t>(device_ptr)); }

}  // namespace ccl_test::fake_cuda
