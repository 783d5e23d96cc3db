#include "algorithms/hierarchical.h"

#include <vector>

#include "algorithms/ring_place.h"
#include "base/error.h"

namespace ccl::algo {

namespace {

// This rank's two rings: its host's ranks (local order) and the ranks sharing its local index
// (host order). O(nranks), checking host_of_rank on the way.
struct HostRings {
  std::vector<int> host_members, cross_members;
  int local = 0, host = 0;
};

HostRings host_rings(const HierarchicalParams& p) {
  const char* who = "hierarchical_allreduce";
  const int n = p.nranks;
  if (n < 1) throw_error(cclInvalidArgument, "%s: nranks %d < 1", who, n);
  if (p.rank < 0 || p.rank >= n) {
    throw_error(cclInvalidArgument, "%s: rank %d not in [0,%d)", who, p.rank, n);
  }
  if (p.host_of_rank.size() != static_cast<size_t>(n)) {
    throw_error(cclInvalidArgument, "%s: host_of_rank has %zu entries for %d ranks", who,
                p.host_of_rank.size(), n);
  }
  // Hosts are 0..H-1, none empty, so H <= n: an index >= n would leave a host empty.
  std::vector<int> local_index(n), per_host;
  for (int r = 0; r < n; ++r) {
    const int h = p.host_of_rank[r];
    if (h < 0 || h >= n) {
      throw_error(cclInvalidArgument, "%s: rank %d has host %d, not in [0,%d)", who, r, h, n);
    }
    if (static_cast<size_t>(h) >= per_host.size()) per_host.resize(h + 1, 0);
    local_index[r] = per_host[h]++;
  }
  const int hosts = static_cast<int>(per_host.size());
  for (int h = 0; h < hosts; ++h) {
    if (per_host[h] != per_host[0]) {
      throw_error(cclInvalidArgument,
                  "%s: hosts have unequal rank counts (host 0: %d, host %d: %d); every host in "
                  "0..%d needs the same number of ranks",
                  who, per_host[0], h, per_host[h], hosts - 1);
    }
  }
  HostRings rings;
  rings.host = p.host_of_rank[p.rank];
  rings.local = local_index[p.rank];
  rings.cross_members.resize(hosts);
  for (int r = 0; r < n; ++r) {
    const int h = p.host_of_rank[r];
    if (h == rings.host) rings.host_members.push_back(r);
    if (local_index[r] == rings.local) rings.cross_members[h] = r;
  }
  return rings;
}

}  // namespace

Schedule hierarchical_allreduce(const HierarchicalParams& params) {
  const HostRings rings = host_rings(params);
  const size_t count = params.count;
  Schedule s;
  if (count == 0) return s;  // touches nothing; buffers may be NULL
  const int local_ranks = static_cast<int>(rings.host_members.size());
  const int hosts = static_cast<int>(rings.cross_members.size());
  const RingPlace host_ring{local_ranks, rings.local, rings.host_members};
  const RingPlace cross_ring{hosts, rings.host, rings.cross_members};
  const Piece whole{0, count};

  // 1. Inside the host. With one rank per host there is nothing to do: step 2 reads Input.
  Buffer partial = Buffer::Input;
  if (local_ranks > 1) {
    append_ring_reduce_scatter(s, host_ring, whole, Buffer::Input, params.chunk_elems);
    partial = Buffer::Output;
  }
  // 2. Across hosts, on this rank's piece (one host, one rank: the copy of Input to Output).
  const Piece piece = split_even(count, local_ranks, rings.local);
  append_ring_reduce_scatter(s, cross_ring, piece, partial, params.chunk_elems);
  const Piece sub = split_even(piece.count, hosts, rings.host);
  if (sub.count != 0) {
    // Finalized by its one owner before anyone copies it.
    s.add_round({Step{StepKind::Finalize, -1, Region{},
                      Region{Buffer::Output, piece.offset + sub.offset, sub.count}}});
  }
  append_ring_allgather(s, cross_ring, piece, params.chunk_elems);
  // 3. Inside the host again.
  append_ring_allgather(s, host_ring, whole, params.chunk_elems);
  return s;
}

}  // namespace ccl::algo
