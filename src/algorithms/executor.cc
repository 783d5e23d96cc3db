#include "algorithms/executor.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"

namespace ccl::algo {

namespace {

using transport::RecvRequest;
using transport::RecvSink;
using transport::SendRequest;

// The registration of the buffer `r` lies in, or nullptr (scratch is never registered).
const transport::RegisteredRegion* registration_of(const ExecBuffers& b, const Region& r) {
  switch (r.buffer) {
    case Buffer::Input:
      return b.input_region;
    case Buffer::Output:
      return b.output_region;
    case Buffer::Scratch:
      return nullptr;
    case Buffer::Slot:
      return r.slot < b.slot_regions.size() ? b.slot_regions[r.slot] : nullptr;
  }
  return nullptr;
}

std::byte* region_address(const ExecBuffers& b, const Region& r, size_t elem_size) {
  std::byte* base = nullptr;
  switch (r.buffer) {
    case Buffer::Input:
      base = static_cast<std::byte*>(const_cast<void*>(b.input));
      break;
    case Buffer::Output:
      base = static_cast<std::byte*>(b.output);
      break;
    case Buffer::Scratch:
      base = static_cast<std::byte*>(b.scratch);
      break;
    case Buffer::Slot:
      base = b.slots[r.slot];
      break;
  }
  return base + r.offset * elem_size;
}

}  // namespace

std::string describe_ranks(std::span<const int> ranks) {
  if (ranks.empty()) return "no rank";
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

ExecOp reduction_op(cclDataType_t type, cclRedOp_t op, int nranks, const MemoryKernels* kernels) {
  ExecOp exec;
  exec.kernels = kernels;
  exec.elem_size = reduce::datatype_size(type);
  exec.reduce = kernels->reduce(type, op);
  if (op == cclAvg) {
    exec.divide = kernels->divide(type);
    exec.divisor = static_cast<uint64_t>(nranks);
  }
  return exec;
}

void StepSink::consume(const std::byte* piece, size_t offset, size_t len) {
  if (src_ != nullptr) {
    op_->reduce(dst_ + offset, src_ + offset, piece, len / op_->elem_size);
  } else if (dst_ + offset != piece) {
    op_->kernels->copy(dst_ + offset, piece, len);
  }
}

void Executor::run(const Schedule& schedule, const ExecBuffers& buffers, const ExecOp& op,
                   Deadline deadline, const OpLabel& what) {
  if (what.rounds == nullptr) {
    for (const Schedule::Round round : schedule.rounds()) {
      run_round(round, buffers, op, deadline, what);
    }
    return;
  }
  for (const Schedule::Round round : schedule.rounds()) {
    what.rounds->round_started(round, op.elem_size);
    run_round(round, buffers, op, deadline, what);
    what.rounds->round_completed();
  }
}

void Executor::run_round(Schedule::Round round, const ExecBuffers& buffers, const ExecOp& op,
                         Deadline deadline, const OpLabel& what) {
  // Reused round after round (clear keeps the capacity): no allocation on the hot path. The
  // reserve below keeps every element's address fixed while its request is posted.
  Posted& posted = posted_;
  posted.sends.clear();
  posted.recvs.clear();
  posted.sinks.clear();
  posted.active.clear();
  const size_t steps = round.size();
  if (posted.sends.capacity() < steps) {
    posted.sends.reserve(steps);
    posted.recvs.reserve(steps);
    posted.sinks.reserve(steps);
  }

  auto connection_to = [&](int peer) {
    if (peer < 0 || static_cast<size_t>(peer) >= links_.connection.size() ||
        links_.connection[peer] == nullptr) {
      throw_error(cclInternalError, "%s: no connection to rank %d", what.str().c_str(), peer);
    }
    transport::Connection* c = links_.connection[peer];
    bool known = false;
    for (auto* a : posted.active) known |= a == c;
    if (!known) posted.active.push_back(c);
    return c;
  };

  // Steps are decoded from the schedule's compact records one at a time (schedule.h).
  for (const Step step : round) {
    const size_t es = op.elem_size;
    switch (step.kind) {
      case StepKind::Copy: {
        std::byte* dst = region_address(buffers, step.dst, es);
        const std::byte* src = region_address(buffers, step.src, es);
        if (dst != src && step.dst.count > 0) op.kernels->move(dst, src, step.dst.count * es);
        break;
      }
      case StepKind::Finalize:
        if (op.divide != nullptr && step.dst.count > 0) {
          op.divide(region_address(buffers, step.dst, es), step.dst.count, op.divisor);
        }
        break;
      case StepKind::Send: {
        SendRequest& req = posted.sends.emplace_back();
        req.data = region_address(buffers, step.src, es);
        req.bytes = step.src.count * es;
        req.region = registration_of(buffers, step.src);
        req.point_to_point = op.point_to_point;
        connection_to(step.peer)->post_send(&req);
        break;
      }
      case StepKind::Recv:
      case StepKind::RecvReduce: {
        std::byte* dst = region_address(buffers, step.dst, es);
        const std::byte* src =
            step.kind == StepKind::RecvReduce ? region_address(buffers, step.src, es) : nullptr;
        RecvRequest& req = posted.recvs.emplace_back();
        req.bytes = step.dst.count * es;
        req.region = registration_of(buffers, step.dst);
        req.sink = &posted.sinks.emplace_back(dst, src, &op);
        connection_to(step.peer)->post_recv(&req);
        break;
      }
    }
  }

  auto done = [&] {
    for (const auto& r : posted.sends) {
      if (!r.complete) return false;
    }
    for (const auto& r : posted.recvs) {
      if (!r.complete) return false;
    }
    return true;
  };

  Clock::time_point idle_since = Clock::now();
  for (;;) {
    bool moved = false;
    for (auto* c : posted.active) moved |= c->progress();
    if (done()) return;
    if (moved) {
      idle_since = Clock::now();
      continue;
    }
    wait_for_progress(deadline, what, idle_since);
  }
}

Executor::Executor(PeerLinks links, WaitPolicy policy, const AbortFlag* abort)
    : links_(std::move(links)), policy_(policy), abort_(abort) {
  for (auto* t : links_.transport) {
    if (t != nullptr && std::find(transports_.begin(), transports_.end(), t) == transports_.end()) {
      transports_.push_back(t);
    }
  }
}

namespace {

// The waits' first two phases: a pause (Spin) or a yield of the core (Yield), then true; false in
// the Sleep phase, where the caller sleeps its own way.
bool pause_unless_sleeping(WaitPolicy::Phase phase) {
  switch (phase) {
    case WaitPolicy::Phase::Spin:
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      return true;
    case WaitPolicy::Phase::Yield:
      sched_yield();
      return true;
    case WaitPolicy::Phase::Sleep:
      break;
  }
  return false;
}

}  // namespace

std::vector<int> Executor::probe_peers(int self, const char* what) const {
  std::vector<int> peers;
  for (size_t p = 0; p < links_.connection.size(); ++p) {
    const transport::Connection* c = links_.connection[p];
    if (static_cast<int>(p) == self || c == nullptr) continue;
    if (!c->can_probe()) {
      throw_error(cclInvalidUsage,
                  "%s: rank %zu is reached over %s, which cannot tell which peer sends first (its "
                  "sender writes only once the receiver asks); receive from a named source",
                  what, p, links_.transport[p]->name());
    }
    peers.push_back(static_cast<int>(p));
  }
  if (peers.empty()) {
    throw_error(cclInvalidUsage,
                "%s: no peer to receive from (a rank's messages to itself are received in the "
                "group that sends them)",
                what);
  }
  return peers;
}

int Executor::probe_any(std::span<const int> peers, Deadline deadline, const OpLabel& what) {
  const Clock::time_point since = Clock::now();
  for (;;) {
    for (size_t i = 0; i < peers.size(); ++i) {
      const size_t k = (next_probe_ + i) % peers.size();
      if (links_.connection[static_cast<size_t>(peers[k])]->incoming()) {
        next_probe_ = k + 1;
        return peers[k];
      }
    }
    const auto now = Clock::now();
    throw_if_stopped(abort_, deadline, now, what, [&](std::vector<int>& pending) {
      pending.assign(peers.begin(), peers.end());
    });
    if (!pause_unless_sleeping(policy_.phase(now - since))) {
      for (auto* t : transports_) t->wait(deadline.remaining(kProbeSleep));
    }
  }
}

void Executor::wait_for_progress(Deadline deadline, const OpLabel& what,
                                 Clock::time_point idle_since) {
  const auto now = Clock::now();
  throw_if_stopped(abort_, deadline, now, what, [&](std::vector<int>& pending) {
    for (size_t peer = 0; peer < links_.connection.size(); ++peer) {
      auto* c = links_.connection[peer];
      if (c != nullptr && c->busy()) pending.push_back(static_cast<int>(peer));
    }
  });
  if (pause_unless_sleeping(policy_.phase(now - idle_since))) return;
  // Sleep in the transports that have work pending; with several, in short turns.
  transport::Transport* sleepers[4] = {};
  size_t count = 0;
  pending_.clear();
  for (size_t peer = 0; peer < links_.connection.size(); ++peer) {
    auto* c = links_.connection[peer];
    if (c == nullptr || !c->busy()) continue;
    pending_.push_back(static_cast<int>(peer));
    auto* t = links_.transport[peer];
    bool seen = false;
    for (size_t i = 0; i < count; ++i) seen |= sleepers[i] == t;
    if (!seen && count < 4) sleepers[count++] = t;
  }
  // A transport that holds data of sends it already called complete gets turns while this rank
  // sleeps elsewhere: a peer may wait for those bytes while this rank waits for that peer
  // (Transport::needs_idle_progress; seen as a broadcast stuck behind a UCX send whose rank had
  // gone on to wait on shared memory only).
  bool idle_turns = false;
  for (auto* t : transports_) {
    if (std::find(sleepers, sleepers + count, t) != sleepers + count) continue;
    if (t->needs_idle_progress()) {
      t->progress_idle();
      idle_turns = true;
    }
  }
  if (count == 0) return;
  if (what.observer != nullptr) what.observer->waiting_for(pending_);
  auto slice = count == 1 && !idle_turns ? std::chrono::microseconds(50000)
                                         : std::chrono::microseconds(1000);
  for (size_t i = 0; i < count; ++i) sleepers[i]->wait(deadline.remaining(slice));
}

}  // namespace ccl::algo
