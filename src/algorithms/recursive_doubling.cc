#include "algorithms/recursive_doubling.h"

#include "core/error.h"

namespace ccl::algo {

Schedule recursive_doubling_allreduce(int nranks, int rank, size_t count) {
  if (nranks < 1) throw_error(cclInvalidArgument, "recursive doubling: nranks %d < 1", nranks);
  if (rank < 0 || rank >= nranks) {
    throw_error(cclInvalidArgument, "recursive doubling: rank %d out of [0, %d)", rank, nranks);
  }
  Schedule s;
  if (count == 0) return s;
  const Region input{Buffer::Input, 0, count};
  const Region output{Buffer::Output, 0, count};
  const Region scratch{Buffer::Scratch, 0, count};

  int p = 1;
  while (p * 2 <= nranks) p *= 2;
  const int extra = nranks - p;

  if (rank >= p) {
    // Folded into rank - p, which sends the finished result back.
    s.rounds.push_back(Round{{Step{StepKind::Send, rank - p, input, Region{}}}});
    s.rounds.push_back(Round{{Step{StepKind::Recv, rank - p, Region{}, output}}});
    return s;
  }

  s.scratch_elems = nranks > 1 ? count : 0;
  Region current = input;
  // The next reduction's destination: never the region being read or sent in the same round.
  auto next_after = [&](const Region& r) { return r.buffer == Buffer::Scratch ? output : scratch; };
  if (rank < extra) {
    Region next = scratch;
    s.rounds.push_back(Round{{Step{StepKind::RecvReduce, rank + p, current, next}}});
    current = next;
  }
  for (int distance = 1; distance < p; distance *= 2) {
    const int partner = rank ^ distance;
    Region next = next_after(current);
    s.rounds.push_back(Round{{Step{StepKind::Send, partner, current, Region{}},
                              Step{StepKind::RecvReduce, partner, current, next}}});
    current = next;
  }
  if (current.buffer != Buffer::Output) {
    s.rounds.push_back(Round{{Step{StepKind::Copy, -1, current, output}}});
  }
  s.rounds.push_back(Round{{Step{StepKind::Finalize, -1, Region{}, output}}});
  if (rank < extra) s.rounds.push_back(Round{{Step{StepKind::Send, rank + p, output, Region{}}}});
  return s;
}

}  // namespace ccl::algo
