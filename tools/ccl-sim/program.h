// A rank's part of one collective as the simulator runs it: the schedule's rounds, each step
// reduced to what timing needs (its kind, its peer, its bytes). Made from the library's own
// schedules (algo::Schedule, the registry's builders), so the simulator runs exactly the steps a
// real run would, not a model of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/schedule.h"

namespace ccl::sim {

enum class OpKind : uint8_t {
  Send,        // bytes to `peer`
  Recv,        // bytes from `peer`
  RecvReduce,  // bytes from `peer`, reduced into a buffer as they arrive
  Copy,        // a local copy of `bytes`
  Reduce,      // a local pass over `bytes` (the final division of an average)
  Delay,       // `bytes` nanoseconds of the rank's time, nothing shared (a call's fixed cost)
};

struct Op {
  OpKind kind = OpKind::Copy;
  int32_t peer = -1;
  uint64_t bytes = 0;
};

/// One rank's program: rounds of ops; all ops of a round may run at once, a round starts when the
/// previous one completed (the executor's rule, src/algorithms/executor.h).
struct Program {
  std::vector<Op> ops;
  std::vector<uint32_t> round_end;  // round r is ops[round_end[r-1], round_end[r])
  size_t rounds() const { return round_end.size(); }
};

/// The program of `schedule` for elements of `elem_size` bytes. `in_place`: the user's send and
/// receive buffers are one, so a copy from the input to the same place of the output is no work
/// (the executor skips it). `average`: the op is cclAvg, whose Finalize steps divide (a pass over
/// the bytes); for every other op Finalize does nothing.
Program program_of(const algo::Schedule& schedule, size_t elem_size, bool in_place, bool average);

/// `calls` back to back: the rounds of `program` `calls` times, each call after the first
/// preceded by a round of one Delay of `call_overhead_us` (the first call's overhead is the
/// engine's start). What nccl-tests times: one rank may start call k + 1 while others still
/// work on call k, as far as the messages between them allow.
Program repeated(const Program& program, int calls, double call_overhead_us);

}  // namespace ccl::sim
