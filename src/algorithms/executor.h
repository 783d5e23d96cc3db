// The executor walks one rank's Schedule over connections: round by round, it starts every step
// of the round (local copies right away, sends and receives as posted requests), then drives the
// connections until the round is complete. It knows nothing of the algorithm or the transport.
//
// Waiting (docs/design-notes.md, "Waiting"): while nothing moves it polls for spin_us, then polls
// with sched_yield for yield_us (so an oversubscribed core goes to the peer that must act), then
// sleeps in the transports' wait() (futex / poll) until woken. Every wait is bounded by the
// deadline and abortable.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "algorithms/memory_kernels.h"
#include "algorithms/reduce/reduce.h"
#include "algorithms/schedule.h"
#include "base/deadline.h"
#include "base/error.h"
#include "transport/transport.h"

namespace ccl::algo {

struct ExecBuffers {
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;            // at least schedule.scratch_elems elements
  std::span<std::byte* const> slots;  // Buffer::Slot regions (send/recv groups)
  // Their registrations (core/registration/registration_cache.h), nullptr where none: each request
  // that sends from or receives into a user buffer carries its registration (transport.h).
  const transport::RegisteredRegion* input_region = nullptr;
  const transport::RegisteredRegion* output_region = nullptr;
  std::span<const transport::RegisteredRegion* const> slot_regions = {};  // empty, or one per slot
};

struct ExecOp {
  size_t elem_size = 0;
  // The kernels of the call's memory kind (memory_kernels.h): every copy and move of the executor
  // goes through them; the reduce and divide below come from the same row.
  const MemoryKernels* kernels = kernels_for(MemoryKind::Host);
  reduce::ReduceFn reduce = nullptr;  // for RecvReduce steps
  reduce::DivideFn divide = nullptr;  // for Finalize steps; nullptr: Finalize is a no-op
  uint64_t divisor = 1;
  bool point_to_point = false;  // the sends are point-to-point messages (SendRequest)
};

// The ExecOp of a reduction of `type` by `op` over `nranks` ranks (avg: sum, then divide), with
// the kernels of `kernels` (the call's memory kind).
ExecOp reduction_op(cclDataType_t type, cclRedOp_t op, int nranks,
                    const MemoryKernels* kernels = kernels_for(MemoryKind::Host));

struct WaitPolicy {
  std::chrono::microseconds spin{20};
  std::chrono::microseconds yield{200};

  // What a waiter does after `idle` without progress: poll, poll yielding the core, or sleep.
  enum class Phase { Spin, Yield, Sleep };
  Phase phase(Clock::duration idle) const {
    return idle < spin ? Phase::Spin : idle < spin + yield ? Phase::Yield : Phase::Sleep;
  }
};

// peer rank -> connection (nullptr where none), and the transport that owns each connection.
struct PeerLinks {
  std::vector<transport::Connection*> connection;
  std::vector<transport::Transport*> transport;
};

// Told whom an operation waits for each time a waiter goes to sleep (the flight recorder).
class WaitObserver {
 public:
  virtual void waiting_for(std::span<const int> peers) = 0;

 protected:
  ~WaitObserver() = default;
};

// Told of every round the executor runs (the trace, CCL_TRACE_FILE): when it starts, with its
// steps, and when it is complete. A round that throws is started and never completed.
class RoundObserver {
 public:
  virtual void round_started(Schedule::Round round, size_t elem_size) = 0;
  virtual void round_completed() = 0;

 protected:
  ~RoundObserver() = default;
};

// Names the operation in error messages ("allreduce #12"); formatted only when one is thrown.
struct OpLabel {
  const char* name = "";
  uint64_t sequence = 0;
  WaitObserver* observer = nullptr;  // may be null
  RoundObserver* rounds = nullptr;   // null: not traced (the executor then only tests it once)
  std::string str() const { return std::string(name) + " #" + std::to_string(sequence); }
};

// "rank 3" or "ranks 1, 3": the peers an operation still waits for, in messages.
std::string describe_ranks(std::span<const int> ranks);

// Every waiter's stop conditions: RemoteError once the communicator is aborted, Timeout at the
// deadline naming the ranks still awaited (`pending(std::vector<int>&)` lists them, called only
// then); the first of them is the error's culprit.
template <typename Pending>
void throw_if_stopped(const AbortFlag* abort, Deadline deadline, Clock::time_point now,
                      const OpLabel& what, Pending&& pending) {
  if (abort != nullptr && abort->load(std::memory_order_relaxed)) {
    throw_error(cclRemoteError, "%s: communicator aborted", what.str().c_str());
  }
  if (now >= deadline.at()) {
    std::vector<int> ranks;
    pending(ranks);
    throw_peer_error(cclTimeout, ranks.empty() ? -1 : ranks.front(), "%s: timed out waiting for %s",
                     what.str().c_str(), describe_ranks(ranks).c_str());
  }
}

// Where one receive goes: a plain copy into dst, or dst = src (op) incoming, piece by piece as it
// arrives (from shared memory the reduction reads the peer's data where it lies).
class StepSink : public transport::RecvSink {
 public:
  StepSink(std::byte* dst, const std::byte* src, const ExecOp* op)
      : dst_(dst), src_(src), op_(op) {}
  void consume(const std::byte* piece, size_t offset, size_t len) override;
  std::byte* direct_destination() override { return src_ == nullptr ? dst_ : nullptr; }

 private:
  std::byte* dst_;
  const std::byte* src_;  // nullptr: plain copy
  const ExecOp* op_;
};

class Executor {
 public:
  Executor(PeerLinks links, WaitPolicy policy, const AbortFlag* abort);

  // Runs the schedule to completion. Throws Timeout at the deadline, RemoteError on abort or a
  // failed peer, naming the operation by `what`.
  void run(const Schedule& schedule, const ExecBuffers& buffers, const ExecOp& op,
           Deadline deadline, const OpLabel& what);

  // A receive from any source: the peer of `peers` whose message began arriving first, looked
  // for with Connection::incoming() round-robin from the peer after the last one found (so one
  // busy sender does not starve the others), waiting as run() does (spin, yield, then sleeps of
  // kProbeSleep in the transports: a connection with nothing posted need not wake a wait()).
  // Timeout at the deadline, RemoteError on abort. `peers` comes from probe_peers().
  int probe_any(std::span<const int> peers, Deadline deadline, const OpLabel& what);
  // The peers a receive from any source asks (all but `self`), before the operation starts:
  // InvalidUsage when there is none, or a peer's transport cannot tell (Connection::can_probe).
  std::vector<int> probe_peers(int self, const char* what) const;
  static constexpr std::chrono::microseconds kProbeSleep{100};

 private:
  void run_round(Schedule::Round round, const ExecBuffers& buffers, const ExecOp& op,
                 Deadline deadline, const OpLabel& what);
  void wait_for_progress(Deadline deadline, const OpLabel& what, Clock::time_point idle_since);

  // Requests and sinks of the current round (see run_round).
  struct Posted {
    std::vector<transport::SendRequest> sends;
    std::vector<transport::RecvRequest> recvs;
    std::vector<StepSink> sinks;
    std::vector<transport::Connection*> active;
  };

  PeerLinks links_;
  std::vector<transport::Transport*> transports_;  // links_.transport's distinct entries
  WaitPolicy policy_;
  Posted posted_;
  std::vector<int> pending_;  // for the WaitObserver, reused
  size_t next_probe_ = 0;     // probe_any's first peer to ask
  const AbortFlag* abort_;
};

}  // namespace ccl::algo
