#include "sweep.h"

#include <algorithm>
#include <array>

namespace ccl::perf {
namespace {

double factor_one(int) { return 1.0; }
double factor_allreduce(int n) { return 2.0 * (n - 1) / n; }
double factor_gather(int n) { return static_cast<double>(n - 1) / n; }

const std::array<CollectiveInfo, 7> kCollectives = {{
    {Collective::AllReduce, "all_reduce", "all_reduce_perf", true, false, factor_allreduce},
    {Collective::Broadcast, "broadcast", "broadcast_perf", false, true, factor_one},
    {Collective::Reduce, "reduce", "reduce_perf", true, true, factor_one},
    {Collective::AllGather, "all_gather", "all_gather_perf", false, false, factor_gather},
    {Collective::ReduceScatter, "reduce_scatter", "reduce_scatter_perf", true, false,
     factor_gather},
    {Collective::AlltoAll, "alltoall", "alltoall_perf", false, false, factor_gather},
    {Collective::SendRecv, "sendrecv", "sendrecv_perf", false, false, factor_one},
}};

// Per-rank piece, rounded down to 16 bytes (elt_size divides 16 for every type).
size_t aligned_piece(size_t count, size_t elt_size, int nranks) {
  const size_t per = count / static_cast<size_t>(nranks);
  const size_t align = elt_size < 16 ? 16 / elt_size : 1;
  return per / align * align;
}

}  // namespace

const CollectiveInfo& collective_info(Collective coll) {
  return kCollectives[static_cast<size_t>(coll)];
}

Geometry geometry(Collective coll, size_t bytes, size_t elt_size, int nranks) {
  const size_t count = bytes / elt_size;
  const auto n = static_cast<size_t>(nranks);
  Geometry g;
  switch (coll) {
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::SendRecv:
      g.send_count = g.recv_count = g.param_count = count;
      break;
    case Collective::AllGather: {
      const size_t base = aligned_piece(count, elt_size, nranks);
      g.send_count = base;
      g.recv_count = base * n;
      g.param_count = base;
      g.send_inplace_offset = base;
      break;
    }
    case Collective::ReduceScatter: {
      const size_t base = aligned_piece(count, elt_size, nranks);
      g.send_count = base * n;
      g.recv_count = base;
      g.param_count = base;
      g.recv_inplace_offset = base;
      break;
    }
    case Collective::AlltoAll: {
      const size_t base = aligned_piece(count, elt_size, nranks);
      g.send_count = g.recv_count = base * n;
      g.param_count = base;
      break;
    }
  }
  return g;
}

size_t row_bytes(const Geometry& g, size_t elt_size) {
  return std::max(g.send_count, g.recv_count) * elt_size;
}

double alg_bandwidth(Collective coll, const Geometry& g, size_t elt_size, int nranks,
                     double seconds) {
  double bytes = static_cast<double>(g.param_count) * static_cast<double>(elt_size);
  switch (coll) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AlltoAll:
      bytes *= nranks;  // the count argument is one rank's piece
      break;
    default:
      break;
  }
  return bytes / 1.0e9 / seconds;
}

double bus_bandwidth(Collective coll, double algbw, int nranks) {
  return algbw * collective_info(coll).bus_factor(nranks);
}

std::vector<size_t> size_sweep(size_t min_bytes, size_t max_bytes, size_t step_bytes,
                               size_t step_factor, size_t limit) {
  std::vector<size_t> sizes;
  size_t size = min_bytes;
  while (size <= max_bytes && sizes.size() < limit) {
    sizes.push_back(size);
    size_t next;
    if (step_factor > 1) {
      if (size > max_bytes / step_factor) break;  // the next one would pass max (or overflow)
      next = size * step_factor;
    } else {
      if (step_bytes == 0 || size > max_bytes - step_bytes) break;
      next = size + step_bytes;
    }
    if (next <= size) break;
    size = next;
  }
  return sizes;
}

std::vector<size_t> warmup_sizes(size_t min_bytes, size_t max_bytes) {
  return size_sweep(std::max<size_t>(min_bytes, 1), max_bytes, 0, 2);
}

}  // namespace ccl::perf
