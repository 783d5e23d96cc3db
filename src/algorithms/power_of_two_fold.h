// Folding n ranks onto the largest power of two p <= n, shared by the butterfly builders
// (recursive_doubling.cc, rabenseifner.cc): the n - p extra ranks r >= p hand their whole Input
// to rank r - p before the exchanges and get the finished result back from it afterwards, so the
// exchanges only ever see p ranks. Internal to src/algorithms; not part of any interface.
#pragma once

#include <cstddef>

#include "algorithms/schedule.h"
#include "base/error.h"

namespace ccl::algo {

struct PowerOfTwoFold {
  int p = 1;            // ranks taking part in the exchanges: 0..p-1
  int extra = 0;        // nranks - p: ranks p..nranks-1 fold into 0..extra-1
  int partner = -1;     // the rank this one folds with, -1 if none
  bool folded = false;  // this rank is an extra: it only sends its Input and receives the result
};

// Throws InvalidArgument (prefixed by `who`) unless nranks >= 1 and rank is in range.
inline PowerOfTwoFold fold_to_power_of_two(int nranks, int rank, const char* who) {
  if (nranks < 1) throw_error(cclInvalidArgument, "%s: nranks %d < 1", who, nranks);
  if (rank < 0 || rank >= nranks) {
    throw_error(cclInvalidArgument, "%s: rank %d out of [0, %d)", who, rank, nranks);
  }
  PowerOfTwoFold f;
  while (f.p <= nranks / 2) f.p *= 2;
  f.extra = nranks - f.p;
  if (rank >= f.p) {
    f.folded = true;
    f.partner = rank - f.p;
  } else if (rank < f.extra) {
    f.partner = rank + f.p;
  }
  return f;
}

// The whole schedule of a folded rank: its Input to the partner, then the result back.
inline Schedule folded_rank_schedule(const PowerOfTwoFold& f, size_t count) {
  Schedule s;
  s.add_round({Step{StepKind::Send, f.partner, Region{Buffer::Input, 0, count}, {}}});
  s.add_round({Step{StepKind::Recv, f.partner, {}, Region{Buffer::Output, 0, count}}});
  return s;
}

}  // namespace ccl::algo
