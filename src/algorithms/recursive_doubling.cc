#include "algorithms/recursive_doubling.h"

#include "algorithms/power_of_two_fold.h"

namespace ccl::algo {

Schedule recursive_doubling_allreduce(int nranks, int rank, size_t count) {
  const PowerOfTwoFold fold = fold_to_power_of_two(nranks, rank, "recursive doubling");
  if (count == 0) return Schedule{};
  // Folded into rank - p, which sends the finished result back.
  if (fold.folded) return folded_rank_schedule(fold, count);

  Schedule s;
  const Region input{Buffer::Input, 0, count};
  const Region output{Buffer::Output, 0, count};
  const Region scratch{Buffer::Scratch, 0, count};
  const int p = fold.p;
  const bool has_extra = fold.partner >= 0;  // rank + p folds into this rank

  s.scratch_elems = nranks > 1 ? count : 0;
  Region current = input;
  // The next reduction's destination: never the region being read or sent in the same round.
  auto next_after = [&](const Region& r) { return r.buffer == Buffer::Scratch ? output : scratch; };
  if (has_extra) {
    Region next = scratch;
    s.add_round({Step{StepKind::RecvReduce, fold.partner, current, next}});
    current = next;
  }
  for (int distance = 1; distance < p; distance *= 2) {
    const int partner = rank ^ distance;
    Region next = next_after(current);
    s.add_round({Step{StepKind::Send, partner, current, Region{}},
                 Step{StepKind::RecvReduce, partner, current, next}});
    current = next;
  }
  if (current.buffer != Buffer::Output) {
    s.add_round({Step{StepKind::Copy, -1, current, output}});
  }
  s.add_round({Step{StepKind::Finalize, -1, Region{}, output}});
  if (has_extra) s.add_round({Step{StepKind::Send, fold.partner, output, Region{}}});
  return s;
}

}  // namespace ccl::algo
