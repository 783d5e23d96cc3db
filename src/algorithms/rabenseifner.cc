#include "algorithms/rabenseifner.h"

#include "algorithms/power_of_two_fold.h"
#include "algorithms/ring_place.h"

namespace ccl::algo {

Schedule rabenseifner_allreduce(int nranks, int rank, size_t count) {
  const PowerOfTwoFold fold = fold_to_power_of_two(nranks, rank, "rabenseifner");
  if (count == 0) return Schedule{};  // touches nothing; buffers may be NULL
  if (fold.folded) return folded_rank_schedule(fold, count);

  Schedule s;
  const Region all_out{Buffer::Output, 0, count};
  const auto p = static_cast<size_t>(fold.p);
  // Pieces [first, first + n) as one contiguous element range of `buffer`.
  const auto block = [&](Buffer buffer, size_t first, size_t n) {
    const size_t begin = split_even(count, p, first).offset;
    const Piece last = split_even(count, p, first + n - 1);
    return Region{buffer, begin, last.offset + last.count - begin};
  };
  // Where this rank's partial sums are: Input until a reduction has written them to Output.
  Buffer current = Buffer::Input;
  if (fold.partner >= 0) {
    s.add_round(
        {Step{StepKind::RecvReduce, fold.partner, Region{Buffer::Input, 0, count}, all_out}});
    current = Buffer::Output;
  }

  // Reduce-scatter by recursive halving over the pieces [lo, lo + width) this rank still reduces.
  const auto me = static_cast<size_t>(rank);
  size_t lo = 0;
  for (size_t width = p; width > 1; width /= 2) {
    const size_t d = width / 2;
    const int partner = static_cast<int>(me ^ d);
    const bool keep_lower = (me & d) == 0;
    const size_t keep = keep_lower ? lo : lo + d, give = keep_lower ? lo + d : lo;
    const Region tx = block(current, give, d);
    const Region local = block(current, keep, d);
    if (tx.count != 0) s.add(send_step(partner, tx));
    if (local.count != 0) {
      s.add(Step{StepKind::RecvReduce, partner, local,
                 Region{Buffer::Output, local.offset, local.count}});
    }
    s.end_round();
    current = Buffer::Output;
    lo = keep;
  }

  const Region owned = block(Buffer::Output, me, 1);
  if (current != Buffer::Output) {  // one rank: nothing has been reduced into Output
    s.add_round({Step{StepKind::Copy, -1, block(Buffer::Input, me, 1), owned}});
  }
  if (owned.count != 0) s.add_round({Step{StepKind::Finalize, -1, Region{}, owned}});

  // Allgather by recursive doubling: swap the block of d pieces this rank holds for the
  // partner's, which is the adjacent block of the same size.
  for (size_t d = 1; d < p; d *= 2) {
    const int partner = static_cast<int>(me ^ d);
    const size_t mine = me & ~(d - 1);
    const Region tx = block(Buffer::Output, mine, d);
    const Region rx = block(Buffer::Output, mine ^ d, d);
    if (tx.count != 0) s.add(send_step(partner, tx));
    if (rx.count != 0) s.add(recv_step(partner, rx));
    s.end_round();
  }

  if (fold.partner >= 0) s.add_round({send_step(fold.partner, all_out)});
  return s;
}

}  // namespace ccl::algo
