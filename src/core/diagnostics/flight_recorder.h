// A flight recorder: the last N operations of one communicator on this rank, with their state
// and, for an operation that waits, the peers it waits for. Dumped to the log on a timeout or an
// error (the caller calls dump()) and on SIGUSR1 (signal_dump.h), so that the rank holding
// everyone up can be named from the logs alone: its peers all show it as pending.
//
// The hot path (begin/end) writes one fixed-size slot of a ring under a mutex held
// for a few stores; a dump copies the ring under the same mutex and formats outside it. A
// capacity of 0 disables the recorder: every call is then a branch and nothing else.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

namespace ccl {

// What one operation is. The strings must have static lifetime (literals): the ring keeps the
// pointers, never copies.
struct OpRecord {
  uint64_t seq = 0;                 // the communicator's operation sequence number
  const char* collective = "";      // "allreduce", "send", ...
  size_t count = 0;                 // elements, as the caller passed it
  int datatype = -1;                // cclDataType_t, -1: none
  int op = -1;                      // cclRedOp_t, -1: none
  int root = -1;                    // -1: none
  int peer = -1;                    // send/recv peer, -1: none
  const char* algorithm = nullptr;  // may be null (not chosen yet, or none)
  const char* protocol = nullptr;   // may be null
  size_t bytes = 0;
};

class FlightRecorder {
 public:
  enum class State : uint8_t { Started, Completed, Failed, Aborted, TimedOut };
  static constexpr int kMaxPending = 8;  // peers kept per operation; more are only counted

  // capacity 0: disabled. comm_name is copied.
  FlightRecorder(size_t capacity, std::string comm_name, int rank, int nranks);
  ~FlightRecorder();  // unregisters itself from the SIGUSR1 registry if it was registered
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool enabled() const { return capacity_ != 0; }
  size_t capacity() const { return capacity_; }

  // Records an operation as Started. Returns a handle for the calls below; 0 when disabled. A
  // handle whose slot has since been reused by a newer operation is ignored by every call below.
  // `at`: when it started, if the caller has just read the steady clock (saves a reading).
  uint64_t begin(const OpRecord& r, std::chrono::steady_clock::time_point at = {}) {
    return capacity_ == 0 ? 0 : record(r, at);
  }
  // The peers the operation waits for now (called when the executor goes to sleep; an empty
  // span clears them). The first kMaxPending are kept, the rest counted.
  void set_pending(uint64_t handle, std::span<const int> peers);
  // Final state (Completed, Failed, Aborted or TimedOut) and the cclResult_t (0: success).
  // `at`: when it ended, if the caller has just read the steady clock (saves a reading).
  void end(uint64_t handle, State s, int result_code,
           std::chrono::steady_clock::time_point at = {});

  // Header line, then one line per kept operation, oldest first; lines end with '\n'.
  std::string format() const;
  // Writes format() to the log, one WARN line each, after a line naming the reason. Follows
  // CCL_DEBUG (nothing unless WARN or more) unless force is set: the SIGUSR1 dump forces it, as
  // the user asked for it explicitly.
  void dump(const char* reason, bool force = false) const;

  static const char* state_name(State s);

 private:
  struct Slot {
    uint64_t handle = 0;  // 0: empty
    OpRecord rec;
    State state = State::Started;
    int result = 0;
    int npending = 0;  // all pending peers, also those beyond kMaxPending
    int pending[kMaxPending] = {};
    int64_t t_start = 0, t_end = 0;  // steady_clock ns; 0: not yet
  };

  uint64_t record(const OpRecord& r, std::chrono::steady_clock::time_point at);
  // The slot of a live handle, or nullptr; mutex_ held.
  Slot* find(uint64_t handle);

  const size_t capacity_;
  const std::string name_;
  const int rank_;
  const int nranks_;
  mutable std::mutex mutex_;
  std::unique_ptr<Slot[]> slots_;
  uint64_t next_handle_ = 1;  // handles count from 1; next_handle_ - 1 operations recorded
};

}  // namespace ccl
