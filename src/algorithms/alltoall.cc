#include "algorithms/alltoall.h"

#include <cstdint>
#include <vector>

#include "base/error.h"

namespace ccl::algo {

namespace {

void check_blocks(const char* what, std::span<const size_t> counts, std::span<const size_t> displs,
                  int nranks) {
  if (counts.size() != static_cast<size_t>(nranks) ||
      displs.size() != static_cast<size_t>(nranks)) {
    throw_error(cclInvalidArgument,
                "pairwise_alltoallv: %zu %scounts and %zu displacements for %d ranks",
                counts.size(), what, displs.size(), nranks);
  }
  for (int q = 0; q < nranks; ++q) {
    if (displs[q] > SIZE_MAX - counts[q]) {
      throw_error(cclInvalidArgument, "pairwise_alltoallv: %sblock %d (%zu at %zu) overflows", what,
                  q, counts[q], displs[q]);
    }
  }
}

}  // namespace

Schedule pairwise_alltoallv(int nranks, int rank, std::span<const size_t> sendcounts,
                            std::span<const size_t> sdispls, std::span<const size_t> recvcounts,
                            std::span<const size_t> rdispls) {
  if (nranks < 1) throw_error(cclInvalidArgument, "pairwise_alltoallv: nranks %d < 1", nranks);
  if (rank < 0 || rank >= nranks) {
    throw_error(cclInvalidArgument, "pairwise_alltoallv: rank %d not in [0,%d)", rank, nranks);
  }
  check_blocks("send ", sendcounts, sdispls, nranks);
  check_blocks("recv ", recvcounts, rdispls, nranks);
  const size_t own = sendcounts[rank];
  if (recvcounts[rank] != own) {
    throw_error(cclInvalidArgument,
                "pairwise_alltoallv: rank %d sends %zu elements to itself but expects %zu", rank,
                own, recvcounts[rank]);
  }
  Schedule s;
  const Step copy_own{StepKind::Copy, -1, Region{Buffer::Input, sdispls[rank], own},
                      Region{Buffer::Output, rdispls[rank], own}};
  bool copied = own == 0;
  for (int k = 1; k < nranks; ++k) {
    const int to = (rank + k) % nranks, from = (rank - k + nranks) % nranks;
    const bool sends = sendcounts[to] != 0, receives = recvcounts[from] != 0;
    if (sends) {
      s.add(Step{StepKind::Send, to, Region{Buffer::Input, sdispls[to], sendcounts[to]}, Region{}});
    }
    if (receives) {
      s.add(Step{StepKind::Recv, from, Region{},
                 Region{Buffer::Output, rdispls[from], recvcounts[from]}});
    }
    // The own block goes in the first round that moves anything, after its transfers are
    // posted, so the copy overlaps them.
    if (!copied && (sends || receives)) {
      s.add(copy_own);
      copied = true;
    }
    s.end_round();
  }
  if (!copied) s.add_round({copy_own});
  return s;
}

Schedule pairwise_alltoall(int nranks, int rank, size_t count) {
  if (nranks < 1) throw_error(cclInvalidArgument, "pairwise_alltoall: nranks %d < 1", nranks);
  // One implementation: alltoallv with equal blocks (two vectors of nranks entries).
  const auto n = static_cast<size_t>(nranks);
  std::vector<size_t> counts(n, count), displs(n);
  for (size_t q = 0; q < n; ++q) displs[q] = q * count;
  return pairwise_alltoallv(nranks, rank, counts, displs, counts, displs);
}

}  // namespace ccl::algo
