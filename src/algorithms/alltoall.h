// Pairwise-exchange alltoallv: one exchange round per peer distance.
//
// Rank r sends sendcounts[q] elements from Input + sdispls[q] to each rank q and receives
// recvcounts[q] elements from q into Output + rdispls[q] (rdispls[r] gets its own block, copied
// locally). At distance k = 1..n-1 it sends to (r+k) % n and receives from (r-k+n) % n in the same
// round. Every rank is at the same distance in the same round, so a send always meets its receive
// in the round where the receiver posts it: no rank relies on the transport buffering a message.
// The own-block copy rides along with the first exchange round (it touches neither block in
// flight).
//
// Bytes on the wire: rank r sends sum(sendcounts) - sendcounts[r] elements and receives
// sum(recvcounts) - recvcounts[r], in at most n-1 rounds of one message each way. A zero count
// is no message: the receiver skips it too, since its recvcounts[q] must equal rank q's
// sendcounts[r] (the caller's contract, as in MPI); a round left without steps is dropped.
// Regions are not checked for overlap (n log n per rank); the Output blocks must not overlap.
// In place is not handled here: the communicator first copies the input to a buffer of its own.
#pragma once

#include <cstddef>
#include <span>

#include "algorithms/schedule.h"

namespace ccl::algo {

Schedule pairwise_alltoallv(int nranks, int rank, std::span<const size_t> sendcounts,
                            std::span<const size_t> sdispls, std::span<const size_t> recvcounts,
                            std::span<const size_t> rdispls);
// All-to-all with `count` elements per rank pair, block q at q * count on both sides.
Schedule pairwise_alltoall(int nranks, int rank, size_t count);

}  // namespace ccl::algo
