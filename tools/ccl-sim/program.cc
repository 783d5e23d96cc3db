// Schedule -> Program: the steps' regions become byte counts; copies the executor skips and
// no-op finalizations are dropped, empty rounds with them.
#include "program.h"

namespace ccl::sim {

namespace {

bool same_place(const algo::Region& a, const algo::Region& b) {
  return a.offset == b.offset && a.count == b.count &&
         ((a.buffer == b.buffer && a.slot == b.slot) ||
          (a.buffer == algo::Buffer::Input && b.buffer == algo::Buffer::Output) ||
          (a.buffer == algo::Buffer::Output && b.buffer == algo::Buffer::Input));
}

}  // namespace

Program program_of(const algo::Schedule& schedule, size_t elem_size, bool in_place, bool average) {
  Program p;
  p.ops.reserve(schedule.step_count());
  p.round_end.reserve(schedule.round_count());
  for (const auto round : schedule.rounds()) {
    for (const algo::Step step : round) {
      Op op;
      op.peer = step.peer;
      switch (step.kind) {
        case algo::StepKind::Send:
          op.kind = OpKind::Send;
          op.bytes = step.src.count * elem_size;
          break;
        case algo::StepKind::Recv:
          op.kind = OpKind::Recv;
          op.bytes = step.dst.count * elem_size;
          break;
        case algo::StepKind::RecvReduce:
          op.kind = OpKind::RecvReduce;
          op.bytes = step.dst.count * elem_size;
          break;
        case algo::StepKind::Copy:
          // In place, a copy between the user's buffers at the same place moves nothing; a copy
          // within one buffer onto itself never does.
          if (same_place(step.src, step.dst) && (in_place || (step.src.buffer == step.dst.buffer &&
                                                              step.src.slot == step.dst.slot))) {
            continue;
          }
          op.kind = OpKind::Copy;
          op.bytes = step.dst.count * elem_size;
          break;
        case algo::StepKind::Finalize:
          if (!average) continue;
          op.kind = OpKind::Reduce;
          op.bytes = step.dst.count * elem_size;
          break;
      }
      p.ops.push_back(op);
    }
    if (p.round_end.empty() ? !p.ops.empty() : p.ops.size() > p.round_end.back()) {
      p.round_end.push_back(static_cast<uint32_t>(p.ops.size()));
    }
  }
  return p;
}

Program repeated(const Program& program, int calls, double call_overhead_us) {
  Program p;
  p.ops.reserve(size_t(calls) * (program.ops.size() + 1));
  p.round_end.reserve(size_t(calls) * (program.rounds() + 1));
  const auto delay_ns = static_cast<uint64_t>(call_overhead_us * 1e3 + 0.5);
  for (int call = 0; call < calls; ++call) {
    if (call > 0 && delay_ns > 0) {
      p.ops.push_back({OpKind::Delay, -1, delay_ns});
      p.round_end.push_back(static_cast<uint32_t>(p.ops.size()));
    }
    const auto base = static_cast<uint32_t>(p.ops.size());
    p.ops.insert(p.ops.end(), program.ops.begin(), program.ops.end());
    for (const uint32_t end : program.round_end) p.round_end.push_back(base + end);
  }
  return p;
}

}  // namespace ccl::sim
