#include "core/diagnostics/flight_recorder.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <utility>
#include <vector>

#include "algorithms/reduce/reduce.h"
#include "base/error.h"
#include "base/log.h"
#include "core/diagnostics/signal_dump.h"

namespace ccl {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// `at` in nanoseconds, or now when the caller passed no reading.
int64_t ns_or_now(std::chrono::steady_clock::time_point at) {
  return at == std::chrono::steady_clock::time_point{}
             ? now_ns()
             : std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// snprintf that appends to a std::string.
void appendf(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0) out.append(buf, std::min(static_cast<size_t>(n), sizeof(buf) - 1));
}

bool finished(FlightRecorder::State s) { return s != FlightRecorder::State::Started; }

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity, std::string comm_name, int rank, int nranks)
    : capacity_(capacity),
      name_(std::move(comm_name)),
      rank_(rank),
      nranks_(nranks),
      slots_(capacity != 0 ? std::make_unique<Slot[]>(capacity) : nullptr) {}

FlightRecorder::~FlightRecorder() {
  // A dump of the SIGUSR1 thread may be running on this recorder; unregistering waits for it.
  if (capacity_ != 0) unregister_recorder(this);
}

const char* FlightRecorder::state_name(State s) {
  switch (s) {
    case State::Started:
      return "started";
    case State::Completed:
      return "completed";
    case State::Failed:
      return "failed";
    case State::Aborted:
      return "aborted";
    case State::TimedOut:
      return "timed-out";
  }
  return "unknown";
}

uint64_t FlightRecorder::record(const OpRecord& r, std::chrono::steady_clock::time_point at) {
  // Outside the lock: reading the clock is the costliest part (a caller that has just read it
  // passes its reading).
  const int64_t t = ns_or_now(at);
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t handle = next_handle_++;
  Slot& slot = slots_[handle % capacity_];
  slot.handle = handle;
  slot.rec = r;
  slot.state = State::Started;
  slot.result = 0;
  slot.npending = 0;
  slot.t_start = t;
  slot.t_end = 0;
  return handle;
}

FlightRecorder::Slot* FlightRecorder::find(uint64_t handle) {
  if (handle == 0) return nullptr;
  Slot& slot = slots_[handle % capacity_];
  return slot.handle == handle ? &slot : nullptr;
}

void FlightRecorder::set_pending(uint64_t handle, std::span<const int> peers) {
  if (capacity_ == 0 || handle == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (Slot* slot = find(handle)) {
    const size_t kept = std::min(peers.size(), static_cast<size_t>(kMaxPending));
    std::copy_n(peers.begin(), kept, slot->pending);
    slot->npending = static_cast<int>(peers.size());
  }
}

void FlightRecorder::end(uint64_t handle, State s, int result_code,
                         std::chrono::steady_clock::time_point at) {
  if (capacity_ == 0 || handle == 0) return;
  const int64_t t = ns_or_now(at);
  std::lock_guard<std::mutex> lock(mutex_);
  if (Slot* slot = find(handle)) {
    slot->state = s;
    slot->result = result_code;
    slot->t_end = t;
  }
}

std::string FlightRecorder::format() const {
  std::string out;
  appendf(out, "flight recorder: comm \"%s\" rank %d of %d: ", name_.c_str(), rank_, nranks_);
  if (capacity_ == 0) {
    out += "disabled (CCL_TRACE_BUFFER_SIZE=0)\n";
    return out;
  }
  // Copy under the lock (a memcpy of the ring), format outside it: begin/end never wait long.
  std::vector<Slot> copy(capacity_);
  uint64_t next;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::copy_n(slots_.get(), capacity_, copy.begin());
    next = next_handle_;
  }
  const int64_t now = now_ns();
  const uint64_t recorded = next - 1;
  const uint64_t first = recorded > capacity_ ? next - capacity_ : 1;
  appendf(out, "%llu ops recorded, the last %llu follow (oldest first)\n",
          static_cast<unsigned long long>(recorded), static_cast<unsigned long long>(next - first));
  for (uint64_t h = first; h < next; ++h) {
    const Slot& s = copy[h % capacity_];
    if (s.handle != h) continue;  // cannot happen under the lock; cheap to guard
    const OpRecord& r = s.rec;
    appendf(out, "  seq %llu %s count %zu", static_cast<unsigned long long>(r.seq),
            r.collective != nullptr ? r.collective : "?", r.count);
    if (r.datatype >= 0)
      appendf(out, " type %s", reduce::datatype_name(static_cast<cclDataType_t>(r.datatype)));
    if (r.op >= cclNumOps)
      appendf(out, " op premulsum(%d)", r.op);
    else if (r.op >= 0)
      appendf(out, " op %s", reduce::op_name(static_cast<cclRedOp_t>(r.op)));
    if (r.root >= 0) appendf(out, " root %d", r.root);
    if (r.peer >= 0) appendf(out, " peer %d", r.peer);
    appendf(out, " bytes %zu", r.bytes);
    if (r.algorithm != nullptr)
      appendf(out, " algo %s%s%s", r.algorithm, r.protocol != nullptr ? "/" : "",
              r.protocol != nullptr ? r.protocol : "");
    appendf(out, " state %s", state_name(s.state));
    if (s.result != 0) appendf(out, " (%s)", result_name(s.result));
    appendf(out, ", started %.3f ms ago", ms(now - s.t_start));
    if (finished(s.state))
      appendf(out, ", took %.3f ms", ms(s.t_end - s.t_start));
    else
      appendf(out, ", running %.3f ms", ms(now - s.t_start));
    // Pending peers also of failed and timed-out operations: whom they waited for is the point.
    if (s.npending > 0 && s.state != State::Completed) {
      out += ", pending peers";
      for (int i = 0; i < std::min(s.npending, kMaxPending); ++i) appendf(out, " %d", s.pending[i]);
      if (s.npending > kMaxPending) appendf(out, " (+%d more)", s.npending - kMaxPending);
    }
    out += '\n';
  }
  return out;
}

void FlightRecorder::dump(const char* reason, bool force) const {
  if (capacity_ == 0) return;
  if (!force && !log_enabled(LogLevel::Warn, kColl)) return;
  const std::string text = format();
  // Lines carry this communicator's rank, as the other log lines of its threads do.
  const int saved_rank = log_thread_rank();
  log_set_thread_rank(rank_);
  log_message(LogLevel::Warn, kColl, "flight recorder dump (%s)", reason != nullptr ? reason : "");
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    log_message(LogLevel::Warn, kColl, "%.*s", static_cast<int>(eol - pos), text.data() + pos);
    pos = eol + 1;
  }
  log_set_thread_rank(saved_rank);
}

}  // namespace ccl
