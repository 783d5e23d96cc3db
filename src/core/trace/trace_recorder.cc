#include "core/trace/trace_recorder.h"

#include <unistd.h>

#include <chrono>
#include <utility>

#include "base/log.h"
#include "core/trace/trace_exit.h"
#include "core/trace/trace_path.h"
#include "core/trace/trace_writer.h"

namespace ccl::trace {

namespace {

int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int64_t now_ns() { return ns_of(Clock::now()); }

}  // namespace

int64_t system_clock_offset_ns() {
  static const int64_t offset = [] {
    const int64_t steady = now_ns();
    const int64_t system = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    return system - steady;
  }();
  return offset;
}

TraceRecorder::TraceRecorder(const TraceSettings& settings, std::string comm_name, int rank,
                             int nranks)
    : max_events_(settings.max_events), pattern_(settings.file), pid_(getpid()) {
  data_.rank = rank;
  data_.nranks = nranks;
  data_.comm_name = std::move(comm_name);
  data_.host = short_host_name();
  data_.clock_offset_ns = system_clock_offset_ns();
}

TraceRecorder::~TraceRecorder() {
  forget_at_exit(this);
  write();
}

void TraceRecorder::connected(const std::string& comm_tag) {
  const std::string path = claim_trace_path(pattern_, data_.rank, data_.comm_name, comm_tag);
  {
    std::lock_guard lock(mutex_);
    path_ = path;
  }
  write_at_exit(this);
  CCL_INFO(kColl, "trace: rank %d writes %s", data_.rank, path.c_str());
}

bool TraceRecorder::room() const {
  const size_t held = data_.ops.size() + data_.rounds.size() + (op_open_ && op_kept_ ? 1 : 0);
  return held < max_events_;
}

void TraceRecorder::op_begin(const OpEvent& op, Clock::time_point at) {
  std::lock_guard lock(mutex_);
  op_open_ = false;
  round_open_ = false;
  if (written_) return;
  op_open_ = true;
  op_kept_ = false;  // room() counts the open operation's record only once it is kept
  op_kept_ = room();
  round_index_ = 0;
  if (!op_kept_) ++data_.dropped;
  open_op_ = op;
  open_op_.start_ns = ns_of(at);
}

void TraceRecorder::set_algorithm(const char* algorithm, const char* protocol) {
  open_op_.algorithm = algorithm;
  open_op_.protocol = protocol;
}

void TraceRecorder::set_group(const char* name, uint64_t bytes) {
  open_op_.name = name;
  open_op_.bytes = bytes;
}

void TraceRecorder::op_end(int result, Clock::time_point at) {
  if (!op_open_) return;
  const int64_t end = ns_of(at);
  std::lock_guard lock(mutex_);
  op_open_ = false;
  if (round_open_ && round_kept_) {
    open_round_.completed = false;
    open_round_.end_ns = end;
    data_.rounds.push_back(open_round_);
  }
  round_open_ = false;
  if (!op_kept_ || written_) return;
  open_op_.result = result;
  open_op_.end_ns = end;
  data_.ops.push_back(open_op_);
}

void TraceRecorder::round_started(algo::Schedule::Round round, size_t elem_size) {
  const int64_t start = now_ns();
  std::lock_guard lock(mutex_);
  RoundEvent& e = open_round_;
  e = RoundEvent{};
  e.index = round_index_++;
  round_open_ = true;
  // Peers are indexed by 32 bits: a pool that could outgrow them keeps no more rounds.
  const bool peers_fit = data_.peers.size() + round.size() < UINT32_MAX;
  round_kept_ = op_kept_ && !written_ && room() && peers_fit;
  if (!round_kept_) {
    if (!written_) ++data_.dropped;
    return;
  }
  e.start_ns = start;
  e.peers_begin = static_cast<uint32_t>(data_.peers.size());
  for (const algo::Step step : round) {
    switch (step.kind) {
      case algo::StepKind::Send:
        e.bytes_sent += step.src.count * elem_size;
        break;
      case algo::StepKind::Recv:
      case algo::StepKind::RecvReduce:
        e.bytes_received += step.dst.count * elem_size;
        break;
      case algo::StepKind::Copy:
      case algo::StepKind::Finalize:
        continue;
    }
    bool seen = false;
    for (size_t i = e.peers_begin; i < data_.peers.size() && !seen; ++i) {
      seen = data_.peers[i] == step.peer;
    }
    if (!seen) data_.peers.push_back(step.peer);
  }
  e.npeers = static_cast<uint32_t>(data_.peers.size() - e.peers_begin);
}

void TraceRecorder::round_completed() {
  if (!round_open_) return;
  round_open_ = false;
  if (!round_kept_) return;
  const int64_t end = now_ns();
  std::lock_guard lock(mutex_);
  if (written_) return;
  open_round_.end_ns = end;
  data_.rounds.push_back(open_round_);
}

void TraceRecorder::write() {
  std::lock_guard lock(mutex_);
  if (written_ || getpid() != pid_) return;
  written_ = true;
  if (path_.empty()) return;  // never connected: no operation ran
  const int saved_rank = log_thread_rank();
  log_set_thread_rank(data_.rank);
  const std::string error = write_trace_file(path_, data_);
  if (!error.empty()) {
    // The user asked for the file: say so whatever CCL_DEBUG is.
    log_message(LogLevel::Warn, kColl, "CCL_TRACE_FILE: cannot write the trace to %s: %s",
                path_.c_str(), error.c_str());
  } else {
    CCL_INFO(kColl, "trace: %zu operations and %zu rounds written to %s", data_.ops.size(),
             data_.rounds.size(), path_.c_str());
    if (data_.dropped != 0) {
      CCL_WARN(kColl, "trace %s: %llu events dropped beyond CCL_TRACE_MAX_EVENTS=%zu",
               path_.c_str(), static_cast<unsigned long long>(data_.dropped), max_events_);
    }
  }
  log_set_thread_rank(saved_rank);
  // The records are not needed any more.
  data_.ops = {};
  data_.rounds = {};
  data_.peers = {};
}

std::string TraceRecorder::path() const {
  std::lock_guard lock(mutex_);
  return path_;
}

uint64_t TraceRecorder::dropped() const {
  std::lock_guard lock(mutex_);
  return data_.dropped;
}

}  // namespace ccl::trace
