// The trace of one communicator on this rank (CCL_TRACE_FILE): one slice per operation and,
// nested in it, one per executor round (bytes sent and received, peers), written as a Chrome /
// Perfetto trace (trace_writer.h) when the communicator is finalized or destroyed (so also after
// cclCommAbort), or when the process exits with it alive (trace_exit.h). The point: a slow step
// of a job is seen in a trace viewer, per rank, side by side.
//
// Cost. Off (CCL_TRACE_FILE unset) the op runner holds no recorder: a null test per operation
// and nothing else (the executor is handed no round observer and tests for it once per
// operation). On: per operation the clock read the op runner makes anyway plus one at its end,
// per round two clock reads and a walk of its steps; each record is an append to a vector under a
// mutex that only the exit handler contends, at most CCL_TRACE_MAX_EVENTS records (96 bytes an
// operation, 48 a round and 4 per peer of it: about 100 MB at the default 1,000,000), the rest
// counted as dropped.
//
// All calls but write() come from the thread that holds the communicator's op mutex.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "algorithms/executor.h"
#include "algorithms/schedule.h"
#include "base/deadline.h"
#include "core/trace/trace_events.h"

namespace ccl::trace {

struct TraceSettings {
  std::string file;             // CCL_TRACE_FILE: the pattern of trace_path.h; empty: off
  size_t max_events = 1000000;  // CCL_TRACE_MAX_EVENTS
};

class TraceRecorder final : public algo::RoundObserver {
 public:
  TraceRecorder(const TraceSettings& settings, std::string comm_name, int rank, int nranks);
  // Writes the file, unless it was written already.
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // The communicator has connected: its file's path is claimed now (trace_path.h, whose rule 3
  // orders communicators by this call). A recorder never connected writes no file.
  void connected(const std::string& comm_tag);

  // An operation, begun at `at` (its start_ns is set from it); until op_end() it is open and may
  // be amended. Ignored once the file is written.
  void op_begin(const OpEvent& op, Clock::time_point at);
  void set_algorithm(const char* algorithm, const char* protocol);
  // A send/recv group: its name ("send", "recv" or "send/recv") and bytes.
  void set_group(const char* name, uint64_t bytes);
  // Closes the open operation (and a round it failed in) with `result` (a cclResult_t), ended
  // at `at`.
  void op_end(int result, Clock::time_point at);

  // The executor's round observer while an operation is open, else nullptr.
  algo::RoundObserver* rounds() { return op_open_ ? this : nullptr; }
  void round_started(algo::Schedule::Round round, size_t elem_size) override;
  void round_completed() override;

  // Writes the file (once: later calls do nothing, and nothing more is recorded). A file that
  // cannot be written is a WARN log line naming it and why, whatever CCL_DEBUG says.
  void write();

  std::string path() const;  // "" until connected
  uint64_t dropped() const;

 private:
  bool room() const;  // mutex_ held: another record fits

  const size_t max_events_;
  const std::string pattern_;
  const pid_t pid_;  // a forked child never writes its parent's file

  // The open operation and round: only the op mutex's holder touches these.
  OpEvent open_op_;
  bool op_open_ = false;
  bool op_kept_ = false;  // false: dropped (its rounds too)
  RoundEvent open_round_;
  bool round_open_ = false;
  bool round_kept_ = false;
  uint32_t round_index_ = 0;  // of the next round of the open operation

  mutable std::mutex mutex_;  // guards what follows
  TraceData data_;
  std::string path_;
  bool written_ = false;
};

}  // namespace ccl::trace
