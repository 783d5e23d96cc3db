// Rabenseifner's allreduce, for mid-size messages: a reduce-scatter by recursive halving, then an
// allgather by recursive doubling. It moves the ring's 2(p-1)/p of the data per rank, but in
// 2 log2(p) exchange rounds instead of the ring's 2(n-1).
//
// With p the largest power of two <= n, the n - p extra ranks r >= p first fold their whole Input
// into rank r - p and get the result back at the end, as recursive_doubling.h does (the shared
// logic is in power_of_two_fold.h). The vector is cut into p near-equal pieces (split_even; some
// are empty when count < p, and exchanges of nothing are left out, as are rounds left empty).
//   - reduce-scatter: at distance d = p/2, p/4, ..., 1 rank r and r ^ d split the pieces they are
//     responsible for in two halves; the rank with bit d clear keeps the lower half. Each sends the
//     half it gives up and reduces the half it keeps with the one it receives, into Output. After
//     log2(p) rounds rank r holds piece r fully reduced and applies the op's final step to it.
//   - allgather: at distance d = 1, 2, ..., p/2 rank r and r ^ d swap the blocks of d pieces they
//     hold, so the block doubles each round; every piece lands in Output on every rank.
// Every rank ends with the same bits: each piece is reduced by its one owner and then only copied.
// Per rank: (p-1)/p * count elements sent and received in each half, 2 log2(p) rounds plus one for
// the final step; a folded pair adds one round and count elements each way at each end. Input is
// only read (the first reduce-scatter round reads the half it keeps from Input and writes it to
// Output, in place the same memory); no Scratch. One rank: Copy, then Finalize. count 0: no steps.
#pragma once

#include <cstddef>

#include "algorithms/schedule.h"

namespace ccl::algo {

Schedule rabenseifner_allreduce(int nranks, int rank, size_t count);

}  // namespace ccl::algo
