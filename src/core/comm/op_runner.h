// The operation runner of a communicator: one operation at a time (op_mutex_), each numbered,
// under its deadline (the communicator's timeout from its start) and recorded in the flight
// recorder (CCL_TRACE_BUFFER_SIZE) and, with CCL_TRACE_FILE, in the trace (trace/trace_recorder.h)
// with its executor rounds; under CCL_CHECK_MODE the ranks first compare what they call.
// It runs the planner's choice (its registry entry's direct run, or its schedule through the
// executor, with the scratch it asks for) and handles failures (DESIGN.md principle 5, issue 6):
// an error is named after the operation, a timeout is traced along the ranks' wait-for edges to
// the rank that holds everyone up, and the first failure is recorded in the status and told to
// every peer (transport.h, failure propagation). With CCL_METRICS_FILE it counts every operation
// by collective and size (diagnostics/metrics_export.h); off, it holds no metrics object and pays
// a null test per operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/executor.h"
#include "algorithms/point_to_point.h"
#include "algorithms/schedule.h"
#include "base/deadline.h"
#include "base/error.h"
#include "ccl/ccl.h"
#include "core/call/reduction_ops.h"
#include "core/comm/async_state.h"
#include "core/comm/options.h"
#include "core/comm/peers.h"
#include "core/comm/planner.h"
#include "core/comm/status.h"
#include "core/diagnostics/flight_recorder.h"
#include "core/diagnostics/metrics_export.h"
#include "core/diagnostics/op_check.h"
#include "core/trace/trace_path.h"
#include "core/trace/trace_recorder.h"
#include "core/tuning/tuner.h"

namespace ccl {

// The ExecOp of a copy of `type` elements (no reduction).
algo::ExecOp copy_op(cclDataType_t type);

class OpRunner {
 public:
  // `check_mode`: CCL_CHECK_MODE; `trace_ops`: CCL_TRACE_BUFFER_SIZE (checked by the caller);
  // `trace`: CCL_TRACE_FILE (empty: no trace) and CCL_TRACE_MAX_EVENTS; `metrics`:
  // CCL_METRICS_FILE (empty: no metrics) and CCL_METRICS_INTERVAL.
  OpRunner(const CommOptions& options, bool check_mode, size_t trace_ops,
           const trace::TraceSettings& trace, CommStatus& status, const AsyncState& async,
           Peers& peers, Planner& planner, const metrics::MetricsSettings& metrics = {});
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;

  std::timed_mutex& mutex() { return op_mutex_; }  // one operation at a time on a communicator
  // Takes op_mutex_ into `lock`, waiting until `deadline` at most; false if it did not. A
  // try_lock in a loop, not a timed lock: ThreadSanitizer misreads pthread_mutex_timedlock.
  bool lock_by(std::unique_lock<std::timed_mutex>& lock, Deadline deadline);
  FlightRecorder* recorder() { return recorder_.get(); }
  uint64_t sequence() const { return sequence_; }  // of the current (or last) operation

  // Throws for `what` if the communicator is unusable: waits (bounded) for a non-blocking init
  // first, then asks the status.
  void check_usable(const char* what) const;

  // The operation begun by begin_op(), until the end of the caller's scope: recorded as
  // completed then, unless it failed (run_op recorded how) or an exception unwinds it.
  class OpScope {
   public:
    explicit OpScope(OpRunner* runner) : runner_(runner), unwinding_(std::uncaught_exceptions()) {}
    ~OpScope();
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

   private:
    OpRunner* runner_;
    int unwinding_;
  };
  // Starts an operation: the caller holds op_mutex_. Throws if the communicator is unusable, and
  // with CCL_CHECK_MODE if the ranks disagree on what they call. Records it in the flight recorder.
  [[nodiscard]] OpScope begin_op(const OpInfo& info);
  // Starts the deadline of work that runs as one operation without a record (the tuner's probes).
  void start_unrecorded() { op_start_ = Clock::now(); }

  // The trace and the metrics (each a null test when there is none). The peers have connected:
  // the trace's file is named now (trace/trace_path.h), the metrics' series get their comm label.
  void connected() {
    if (trace_) trace_->connected(peers_.comm_tag());
    if (metrics_) metrics_->connected(trace::communicator_tag(options_.name, peers_.comm_tag()));
  }
  // Writes the trace's file and the metrics file (finalize; the destructors do otherwise).
  void write_trace() {
    if (trace_) trace_->write();
    if (metrics_) metrics_->write_now();
  }
  // The current operation runs `algorithm` (and `protocol`, may be null): static strings. A
  // choice run by run_choice() is noted there.
  void note_algorithm(const char* algorithm, const char* protocol) {
    if (trace_) trace_->set_algorithm(algorithm, protocol);
  }
  // The current operation is this send/recv group: named "send", "recv" or "send/recv" in the
  // trace, with the sum of its bytes (the trace's and the metrics').
  void note_group(std::span<const algo::PointToPoint> operations) {
    if (trace_ || metrics_) note_group_bytes(operations);
  }

  // Runs `body(deadline, label)` as operation `what`, recording its failure.
  template <typename Body>
  void run_op(const char* what, Body&& body);
  // Runs `schedule` with the scratch it asks for (the caller holds op_mutex_); `what` names it.
  // `memory`: the call's buffers resolved already (call_memory.h); nullptr resolves them here.
  void execute(const algo::Schedule& schedule, const void* input, void* output,
               const algo::ExecOp& op, const char* what, const CallMemory* memory = nullptr);
  // Runs the operation `what` as `choice` says: its entry's direct run, or its schedule through
  // the executor. `bytes` as the tuner saw it (algo_selection.h).
  void run_choice(const tune::Choice& choice, const char* what, const void* input, void* output,
                  size_t count, size_t bytes, const algo::ExecOp& exec, int root,
                  const CallMemory* memory = nullptr);

  void* scratch(size_t bytes);  // executor scratch of at least `bytes`
  // The input a reduction reads: `sendbuff`, or for PreMulSum a scaled copy of it.
  const void* reduction_input(const Reduction& r, const void* sendbuff, size_t count);
  // A private copy of `bytes` of `data` (for in-place all-to-all, whose input it overwrites).
  const void* staged_copy(const void* data, size_t bytes);

  // Marks the communicator failed with error.code() for an error thrown by one of its
  // operations, and tells every peer, so that they fail now rather than at their timeout
  // (transport.h). Call it from the thread that holds op_mutex_.
  void record_failure(const Error& error);

 private:
  // CCL_CHECK_MODE: the ranks exchange `info` and compare (op_check.h).
  void check_agreement(const OpInfo& info);
  // Records the current operation's failure by `error` and dumps the flight recorder.
  void end_record(const Error& error);
  // Closes the current operation's record, in the flight recorder, the trace and the metrics.
  void finish_record(FlightRecorder::State state, int result_code);
  // Counts the current operation, ended in `state` with `result_code` `took` after its start,
  // in metrics_.
  void count_operation(FlightRecorder::State state, int result_code, Clock::duration took);
  // The group's bytes (the trace's and the metrics'), and its name in the trace.
  void note_group_bytes(std::span<const algo::PointToPoint> operations);
  // The Timeout to report for `error` (a timeout of the operation `label`, own or a peer's):
  // names the rank that holds everyone up, found along the ranks' wait-for edges.
  Error resolve_timeout(const Error& error, const std::string& label);
  // A peer's connection closed under this rank (first-hand: no notice came with it): with 3 or
  // more ranks that peer may have failed for another rank's sake, and said so to others first
  // (its own notice to us can be lost behind a half-sent message). Looks briefly for a failure
  // notice another peer posted that names another culprit, and reports that root cause.
  Error resolve_closed_peer(const Error& error, const std::string& label);
  // The current operation waits for `peers` (each time the executor goes to sleep).
  void note_pending(std::span<const int> peers);

  const CommOptions& options_;
  CommStatus& status_;
  const AsyncState& async_;
  Peers& peers_;
  Planner& planner_;
  uint64_t sequence_ = 0;
  Clock::time_point op_start_{};  // of the current operation: its deadline counts from here
  const bool check_mode_;         // CCL_CHECK_MODE
  uint64_t checked_collectives_ = 0;
  // The flight recorder (CCL_TRACE_BUFFER_SIZE) and the current operation's record in it.
  std::unique_ptr<FlightRecorder> recorder_;
  uint64_t record_ = 0;
  bool record_ended_ = true;
  std::unique_ptr<trace::TraceRecorder> trace_;  // CCL_TRACE_FILE; nullptr: off
  // CCL_METRICS_FILE; nullptr: off. What it counts of the current operation, set by begin_op
  // (and note_group) only when it is on.
  std::unique_ptr<metrics::MetricsExport> metrics_;
  OpKind metric_kind_ = OpKind::Barrier;
  uint64_t metric_bytes_ = 0;
  // Whom the current operation waits for, when the executor goes to sleep: for the recorder and
  // for resolve_timeout().
  struct PendingObserver final : algo::WaitObserver {
    OpRunner* runner = nullptr;
    void waiting_for(std::span<const int> peers) override { runner->note_pending(peers); }
  } pending_observer_;
  std::vector<int> pending_now_;
  std::timed_mutex op_mutex_;  // one operation at a time on a communicator
  std::vector<std::byte> scratch_;
  std::vector<std::byte> staging_;  // PreMulSum's scaled input, in-place all-to-all's copy
};

template <typename Body>
void OpRunner::run_op(const char* what, Body&& body) {
  algo::OpLabel name{what, sequence_, &pending_observer_, trace_ ? trace_->rounds() : nullptr};
  pending_now_.clear();
  try {
    body(Deadline(op_start_ + options_.timeout), name);
  } catch (const Error& e) {
    // Errors from inside a transport do not know the operation: name it (and its number).
    const std::string label = name.str();
    Error named =
        std::string_view(e.what()).starts_with(label) ? e : e.with_message(label + ": " + e.what());
    if (named.code() == cclTimeout) named = resolve_timeout(named, label);
    if (named.code() == cclRemoteError) named = resolve_closed_peer(named, label);
    end_record(named);
    record_failure(named);
    throw named;
  }
}

}  // namespace ccl
