// The ranks of one host as one device world: the collectives of a communicator on device
// buffers run as device programs (algorithms/device/device_program.h) queued on CUDA streams,
// with no byte through host memory and no host thread waiting for a stream.
//
// Made once, when the communicator is made (collective over its ranks): where every rank is on
// this host, has the CUDA driver and the kernels, and has a CUDA context current on the thread
// that makes the communicator (the device it is bound to, as NCCL binds a communicator to the
// device current at init), each rank allocates its scratch (two halves of CCL_CUDA_SCRATCH / 2
// bytes) on its device, the ranks exchange their scratch's IPC handles and their devices, check
// that every device can read every other's memory (P2P), open the peers' scratch once (CUDA IPC,
// or the address itself inside one process) and map one page of flags in shared host memory
// (flag_page.h). If any rank cannot, no rank has a device world, and device buffers go through
// host memory as before (core/device/device_staging.h). Nothing is exchanged per call.
//
// Per call: a call whose buffers are device memory (of the communicator's context) runs here,
// one whose buffers are host memory on the host; mixing the two in one call is an error. The
// order of the device programs of a communicator is the order of its calls, which must be the
// same on every rank (as with NCCL): a call on a ccl stream made from a CUDA stream is queued on
// that stream when it is made (enqueue); one on the NULL stream is queued on the world's own
// stream, after the work of the legacy stream, and waited for (run); one on a ccl stream of
// host work when the stream runs it (run). Programs queued on different streams run in that
// order too: a program queued on another stream than the previous one waits there for the
// previous one's end (an event; no host thread waits), since all share the scratch and the
// flags. Programs captured into a graph are ordered by the graph's launches, which the caller
// orders (the wait is not captured).
//
// Failure: a stream never waits unbounded. Every program queued outside a graph capture ends by
// writing its number into this rank's word of the flag page; the watchdog (device_watchdog.h)
// reads those words, and when a program is not done within the communicator's timeout, or the
// communicator was aborted, or another rank released the page, it releases the page (every wait
// of every rank's stream goes on) and marks the communicator failed (cclTimeout or
// cclRemoteError; cclCommGetAsyncError, cclGetLastError).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "algorithms/device/device_collectives.h"
#include "base/deadline.h"
#include "ccl/ccl.h"
#include "core/call/call.h"
#include "core/device/flag_page.h"
#include "cuda/cuda_ipc.h"
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_memory.h"
#include "cuda/stream_ops.h"

namespace ccl {

// What one call binds a program's spaces to, and how it reduces.
struct DeviceBindings {
  const void* input = nullptr;
  void* output = nullptr;
  std::span<std::byte* const> slots;
  cclDataType_t type = cclUint8;
  cclRedOp_t op = cclSum;    // the base op: avg and PreMulSum reduce as sum
  uint64_t scalar_bits = 0;  // PreMulSum's scalar, its element's bits in the low bytes
};

class DeviceWorld {
 public:
  // Exchanges `bytes` of every rank's `mine` into `all` (nranks * bytes), over the host path.
  using AllGather = std::function<void(const void* mine, void* all, size_t bytes)>;
  // Marks the communicator failed (from the watchdog's thread or the caller's).
  using Failure = std::function<void(cclResult_t code, const std::string& message)>;

  struct Setup {
    int rank = 0;
    int nranks = 1;
    std::string comm_tag;     // names the flag page
    void* context = nullptr;  // current when the communicator was made; nullptr: none
    bool enabled = true;      // CCL_CUDA_IPC
    uint64_t half_bytes = 0;  // one scratch half (CCL_CUDA_SCRATCH / 2)
    std::chrono::milliseconds timeout{0};
    const AbortFlag* abort = nullptr;
    Failure on_failure;
  };

  // The ranks of one host that can all take part: any rank whose scratch, IPC or P2P fails makes
  // every rank return nullptr (the same answer everywhere). Collective: every rank of a
  // communicator on one host calls it, once. Throws what the exchange throws.
  static std::unique_ptr<DeviceWorld> create(const Setup& setup, const AllGather& all_gather);
  ~DeviceWorld();
  DeviceWorld(const DeviceWorld&) = delete;
  DeviceWorld& operator=(const DeviceWorld&) = delete;

  // Ranks at most (the flags of a page and the sub-slots of a half grow with the square).
  static constexpr int kMaxRanks = 32;

  void* context() const { return context_; }
  // Every rank's buffers are on one GPU (the cost model's case of a shared memory).
  bool one_device() const { return link_ == cuda::PeerLink::SameDevice; }
  // The slowest link between two of the ranks' GPUs (SameDevice: all on one GPU).
  cuda::PeerLink link() const { return link_; }
  algo::device::Shape shape(size_t elem_size) const {
    return {nranks_, rank_, elem_size, half_bytes_};
  }

  // Whether the call runs here: its non-null buffers are device memory (or it has none, as a
  // barrier). Throws cclInvalidArgument for device and host buffers in one call, or device
  // buffers of another context than the communicator's.
  bool takes(const Call& call) const;

  // Queues `program` on `stream` (a CUDA stream of this world's context) and returns: the
  // caller's buffers must stay valid until the stream has run it.
  void enqueue(const algo::device::Program& program, const DeviceBindings& bindings, void* stream);
  // Queues it on the world's own stream after the work queued so far on the legacy stream (a
  // stream wait, not a host wait) and waits until it is done, bounded by the timeout (then
  // cclTimeout, and the page released). Inside an operation of a ccl stream ordered by a CUDA
  // stream (cuda::OrderedByCudaStream), without the legacy stream's order.
  void run(const algo::device::Program& program, const DeviceBindings& bindings);

  // Reports `code` once (the first failure wins: the communicator's error), then releases every
  // stream waiting on this world's flags, on every rank.
  void fail(cclResult_t code, const std::string& message);

  // The watchdog's look at the programs in flight (device_watchdog.h): drops those done,
  // fails the world past a deadline, on an abort or a release by another rank. Host memory
  // only, no driver call. True while programs are in flight.
  bool check(Clock::time_point now);

  // Programs queued outside a capture and not yet seen done (for tests).
  size_t in_flight() const;

 private:
  explicit DeviceWorld(const Setup& setup);
  // The driver calls of one program on `stream` (device_executor.cc); `done`: the number its
  // end writes into this rank's word (with its last flags), 0 for none (a graph capture).
  void queue_program(const algo::device::Program& program, const DeviceBindings& bindings,
                     void* stream, uint32_t done);
  std::byte* resolve(const algo::device::Ref& ref, const DeviceBindings& bindings) const;
  // A program queued outside a capture: its number (for this rank's word), and a deadline.
  uint32_t track();
  void* temp(uint64_t bytes);

  const int rank_;
  const int nranks_;
  const uint64_t half_bytes_;
  const std::chrono::milliseconds timeout_;
  const AbortFlag* const abort_;
  const Failure on_failure_;
  void* context_ = nullptr;
  cuda::PeerLink link_ = cuda::PeerLink::SameDevice;
  // Another rank of this process is on this rank's GPU: they share its legacy stream, on which
  // one rank's program would wait for the other's, queued behind it (refused in enqueue).
  bool shares_legacy_stream_ = false;

  cuda::DeviceAllocation scratch_;  // this rank's two halves
  std::vector<std::byte*> peers_;   // every rank's scratch as this process reaches it
  cuda::IpcImports imports_;        // the peers' scratch, opened once
  std::unique_ptr<FlagPage> page_;
  cuda::DeviceKernels kernels_;
  cuda::OwnStream own_stream_;                 // run()'s
  std::vector<cuda::DeviceAllocation> temps_;  // in-place alltoallv's copies; the last is in use

  std::mutex queue_mutex_;  // one program queued at a time: their order is the calls' order
  // The last program queued outside a capture, and its stream (under queue_mutex_): the next one,
  // on another stream, waits for it there.
  std::unique_ptr<cuda::Event> last_program_;
  std::optional<void*> last_stream_;
  mutable std::mutex flight_mutex_;
  struct InFlight {
    uint32_t number = 0;
    Clock::time_point deadline;
  };
  std::deque<InFlight> flight_;  // under flight_mutex_
  uint32_t issued_ = 0;          // under flight_mutex_
  bool failed_ = false;          // under flight_mutex_
};

}  // namespace ccl
