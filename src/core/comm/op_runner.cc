#include "core/comm/op_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "algorithms/reduce/reduce.h"
#include "base/log.h"
#include "core/tuning/registry.h"

namespace ccl {

algo::ExecOp copy_op(cclDataType_t type) {
  algo::ExecOp exec;
  exec.elem_size = reduce::datatype_size(type);
  return exec;
}

namespace {

// The size nccl-tests reports for the call: the count's bytes, times nranks for allgather (the
// output), reducescatter (the input) and alltoall; an alltoallv's count is what this rank sends;
// send/recv groups have none here (a group's comes from note_group_bytes). The trace and the
// metrics both count these.
uint64_t op_bytes(const OpInfo& info, int nranks) {
  const uint64_t elem =
      info.datatype >= 0 ? reduce::datatype_size(static_cast<cclDataType_t>(info.datatype)) : 0;
  const bool per_rank = info.kind == OpKind::AllGather || info.kind == OpKind::ReduceScatter ||
                        info.kind == OpKind::AlltoAll;
  return info.count * elem * (per_rank ? static_cast<uint64_t>(nranks) : 1);
}

// The trace's record of an operation, with op_bytes.
trace::OpEvent trace_event(const OpInfo& info, const char* name, uint64_t seq, int nranks) {
  trace::OpEvent e;
  e.seq = seq;
  e.name = name;
  e.count = info.count;
  e.datatype = info.datatype;
  e.op = info.op;
  e.root = info.root;
  e.peer = info.peer;
  e.bytes = op_bytes(info, nranks);
  return e;
}

// CCL_METRICS_FILE as trace_path.h's rules 1 and 2 name it for this rank.
std::unique_ptr<metrics::MetricsExport> make_metrics(const metrics::MetricsSettings& settings,
                                                     int rank, int nranks) {
  if (settings.file.empty()) return nullptr;
  const std::string path = trace::expand_trace_pattern(settings.file, trace::short_host_name(),
                                                       static_cast<long>(getpid()), rank);
  return std::make_unique<metrics::MetricsExport>(settings, path, rank, nranks);
}

}  // namespace

OpRunner::OpRunner(const CommOptions& options, bool check_mode, size_t trace_ops,
                   const trace::TraceSettings& trace, CommStatus& status, const AsyncState& async,
                   Peers& peers, Planner& planner, const metrics::MetricsSettings& metrics)
    : options_(options),
      status_(status),
      async_(async),
      peers_(peers),
      planner_(planner),
      check_mode_(check_mode),
      recorder_(
          std::make_unique<FlightRecorder>(trace_ops, options.name, options.rank, options.nranks)),
      trace_(trace.file.empty() ? nullptr
                                : std::make_unique<trace::TraceRecorder>(
                                      trace, options.name, options.rank, options.nranks)),
      metrics_(make_metrics(metrics, options.rank, options.nranks)) {
  pending_observer_.runner = this;
}

bool OpRunner::lock_by(std::unique_lock<std::timed_mutex>& lock, Deadline deadline) {
  lock = std::unique_lock(op_mutex_, std::defer_lock);
  while (!lock.try_lock()) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void OpRunner::check_usable(const char* what) const {
  if (!async_.ready()) async_.wait_initialized(what);
  status_.throw_if_unusable(what);
}

OpRunner::OpScope OpRunner::begin_op(const OpInfo& info) {
  const char* name = op_kind_name(info.kind);
  check_usable(name);
  ++sequence_;
  op_start_ = Clock::now();
  record_ = recorder_->begin(OpRecord{sequence_, name, info.count, info.datatype, info.op,
                                      info.root, info.peer, nullptr, nullptr, 0},
                             op_start_);
  record_ended_ = false;
  if (trace_) trace_->op_begin(trace_event(info, name, sequence_, options_.nranks), op_start_);
  if (metrics_) {
    metric_kind_ = info.kind;
    metric_bytes_ = op_bytes(info, options_.nranks);
  }
  if (check_mode_ && info.kind != OpKind::SendRecv) check_agreement(info);
  return OpScope(this);
}

OpRunner::OpScope::~OpScope() {
  if (runner_->record_ended_) return;
  const bool failed = std::uncaught_exceptions() > unwinding_;
  runner_->finish_record(failed ? FlightRecorder::State::Failed : FlightRecorder::State::Completed,
                         failed ? cclInternalError : cclSuccess);
}

void OpRunner::finish_record(FlightRecorder::State state, int result_code) {
  record_ended_ = true;
  // One reading of the clock for everything that notes the end.
  if (!recorder_->enabled() && !trace_ && !metrics_) return;
  const Clock::time_point end = Clock::now();
  recorder_->end(record_, state, result_code, end);
  if (trace_) trace_->op_end(result_code, end);
  if (metrics_) count_operation(state, result_code, end - op_start_);
}

void OpRunner::count_operation(FlightRecorder::State state, int result_code, Clock::duration took) {
  using State = FlightRecorder::State;
  // A peer's failure reaches this rank as cclRemoteError; after its own abort (or a revoke,
  // which aborts) the state says Aborted instead.
  const metrics::Outcome outcome = state == State::Completed  ? metrics::Outcome::Completed
                                   : state == State::TimedOut ? metrics::Outcome::TimedOut
                                   : state == State::Failed && result_code == cclRemoteError
                                       ? metrics::Outcome::PeerFailed
                                       : metrics::Outcome::Failed;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
  metrics_->record(metric_kind_, metric_bytes_, static_cast<uint64_t>(ns), outcome);
}

void OpRunner::end_record(const Error& error) {
  if (record_ended_) return;
  FlightRecorder::State state = error.code() == cclTimeout ? FlightRecorder::State::TimedOut
                                : status_.aborted()        ? FlightRecorder::State::Aborted
                                                           : FlightRecorder::State::Failed;
  finish_record(state, error.code());
  recorder_->dump(error.what());
}

void OpRunner::note_group_bytes(std::span<const algo::PointToPoint> operations) {
  uint64_t bytes = 0;
  bool sends = false, recvs = false;
  for (const algo::PointToPoint& p : operations) {
    bytes += p.bytes;
    (p.send ? sends : recvs) = true;
  }
  metric_bytes_ = bytes;
  if (!trace_ || (!sends && !recvs)) return;
  trace_->set_group(sends && recvs ? "send/recv" : sends ? "send" : "recv", bytes);
}

void OpRunner::check_agreement(const OpInfo& info) {
  const OpDescriptor mine = describe(info, ++checked_collectives_);
  std::vector<OpDescriptor> all(options_.nranks);
  const size_t bytes = sizeof(OpDescriptor);
  // Through the message rings, not the shared window: the window's mailboxes make every rank
  // wait until all have finished the previous operation, which costs more than the exchange.
  tune::Choice ring;
  ring.entry = tune::find_entry(tune::Collective::AllGather, tune::Algorithm::Ring);
  ring.algorithm = tune::Algorithm::Ring;
  execute(planner_.cached(ring, bytes, -1, 1), &mine, all.data(), copy_op(cclUint8), "check");
  const std::string mismatch = mismatch_message(all);
  if (mismatch.empty()) return;
  // Every rank saw the same table, so every rank fails here with the same message. No notice:
  // it could reach a peer still in the exchange and fail it as "rank N failed" instead.
  const Error error(cclInvalidUsage, std::string("CCL_CHECK_MODE: ") + mismatch);
  end_record(error);
  status_.mark_failed(error.code());
  throw error;
}

void OpRunner::run_choice(const tune::Choice& choice, const char* what, const void* input,
                          void* output, size_t count, size_t bytes, const algo::ExecOp& exec,
                          int root, const CallMemory* memory) {
  const CallMemory resolved =
      memory != nullptr ? *memory : peers_.resolve_memory(what, input, output);
  if (trace_) {  // the names are looked up only for a trace
    trace_->set_algorithm(tune::algorithm_name(choice.algorithm),
                          tune::protocol_name(choice.protocol));
  }
  if (choice.entry->run == nullptr) {
    return execute(planner_.cached(choice, count, root, exec.elem_size), input, output, exec, what,
                   &resolved);
  }
  algo::DirectCollectives* direct = peers_.direct();
  if (!direct) throw_error(cclInternalError, "%s: a direct algorithm without a window", what);
  algo::ExecOp call = exec;
  call.kernels = resolved.kernels;
  run_op(what, [&](Deadline deadline, const algo::OpLabel& name) {
    choice.entry->run(tune::RunArgs{*direct, input, output, bytes, count, call, root,
                                    choice.protocol, deadline, name});
  });
}

void OpRunner::execute(const algo::Schedule& schedule, const void* input, void* output,
                       const algo::ExecOp& op, const char* what, const CallMemory* memory) {
  const CallMemory resolved =
      memory != nullptr ? *memory : peers_.resolve_memory(what, input, output);
  algo::ExecOp call = op;
  call.kernels = resolved.kernels;
  // Every schedule gets the scratch it asks for, whatever the collective.
  algo::ExecBuffers buffers{input, output, scratch(schedule.scratch_elems * op.elem_size), {}};
  buffers.input_region = resolved.input;
  buffers.output_region = resolved.output;
  run_op(what, [&](Deadline deadline, const algo::OpLabel& name) {
    CCL_TRACE(kColl, "%s: %zu rounds", name.str().c_str(), schedule.round_count());
    peers_.executor().run(schedule, buffers, call, deadline, name);
  });
}

namespace {

// Buffers kept for the life of the communicator: touched once, no page faults on later calls.
std::byte* at_least(std::vector<std::byte>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

}  // namespace

void* OpRunner::scratch(size_t bytes) { return at_least(scratch_, bytes); }

const void* OpRunner::reduction_input(const Reduction& r, const void* sendbuff, size_t count) {
  if (r.scale == nullptr) return sendbuff;
  std::byte* scaled = at_least(staging_, count * r.exec.elem_size);
  r.scale(scaled, sendbuff, count, r.scalar.data());
  return scaled;
}

const void* OpRunner::staged_copy(const void* data, size_t bytes) {
  std::byte* copy = at_least(staging_, bytes);
  if (bytes != 0) memcpy(copy, data, bytes);
  return copy;
}

void OpRunner::record_failure(const Error& error) {
  status_.mark_failed(error.code());
  // An abort makes the running operation fail: tell the peers it was that.
  peers_.notify(status_.aborted() ? transport::abort_notice(options_.rank)
                                  : transport::notice_for(error, options_.rank));
}

void OpRunner::note_pending(std::span<const int> peers) {
  pending_now_.assign(peers.begin(), peers.end());
  recorder_->set_pending(record_, peers);
}

// Every rank that times out, or learns of a timeout, posts its own wait-for edge (itself -> the
// first peer it waits for) as its notice, then collects the others' edges for a short grace.
// Following the edges from the ranks this one waits for ends at a rank that posted none: it is
// not waiting for anybody in this operation (stopped, hung, or calling something else), so it
// holds everyone up. Every rank finds the same end, so every message names the same rank.
Error OpRunner::resolve_timeout(const Error& error, const std::string& label) {
  const int first_pending = !pending_now_.empty() ? pending_now_.front() : error.culprit();
  const int rank = options_.rank;
  if (first_pending < 0 || options_.nranks < 3) return error;  // two ranks: the peer is the culprit
  transport::FailureNotice edge;
  edge.code = cclTimeout;
  edge.origin = rank;
  edge.culprit = first_pending;
  peers_.notify(edge);
  std::map<int, int> waits_for;  // rank -> the rank it waits for
  waits_for[rank] = first_pending;
  const auto grace = std::clamp(options_.timeout / 10, std::chrono::milliseconds(200),
                                std::chrono::milliseconds(1000));
  const Deadline until = Deadline::after(grace);
  std::vector<std::pair<int, transport::FailureNotice>> notices;
  int culprit = -1;
  for (;;) {
    notices.clear();
    peers_.collect_notices(notices);
    for (const auto& [from, notice] : notices) {
      if (notice.code == cclTimeout && notice.origin == from && notice.culprit >= 0) {
        waits_for[from] = notice.culprit;
      }
    }
    // Follow the edges from our own; a cycle means ranks wait on each other (nobody is the end).
    std::set<int> seen{rank};
    int at = first_pending;
    while (waits_for.count(at) && seen.insert(at).second) at = waits_for[at];
    culprit = seen.count(at) ? -1 : at;
    if (until.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (culprit < 0) {
    return Error(cclTimeout,
                 label + ": timed out waiting for rank " + std::to_string(first_pending) +
                     "; the ranks wait on each other (did they call different collectives?)",
                 first_pending);
  }
  std::string chain;
  for (int at = first_pending; at != culprit; at = waits_for[at]) {
    chain += std::to_string(at) + " -> ";
  }
  std::string message = label + ": timed out waiting for rank " + std::to_string(culprit);
  if (culprit != first_pending) {
    message += " (this rank waits for " + chain + std::to_string(culprit) +
               ", which waits for no one: it holds everyone up)";
  }
  return Error(cclTimeout, message, culprit);
}

Error OpRunner::resolve_closed_peer(const Error& error, const std::string& label) {
  const int closed = error.culprit();
  if (closed < 0 || error.origin() >= 0 || options_.nranks < 3) return error;
  // The notice that made the closed peer fail went out at the same moment as ours would have:
  // 50 ms covers a relay through one more transport, and a plain crash of `closed` costs no more.
  const Deadline until = Deadline::after(std::chrono::milliseconds(50));
  std::vector<std::pair<int, transport::FailureNotice>> notices;
  for (;;) {
    notices.clear();
    peers_.collect_notices(notices);
    for (const auto& [from, notice] : notices) {
      if (notice.kind != transport::FailureNotice::kFailed || notice.culprit < 0 ||
          notice.culprit == closed || notice.culprit == options_.rank) {
        continue;
      }
      try {
        transport::throw_notice(notice, from);
      } catch (const Error& root) {
        return root.with_message(label + ": " + root.what() + " (the connection to rank " +
                                 std::to_string(closed) + " closed too)");
      }
    }
    if (until.expired()) return error;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace ccl
