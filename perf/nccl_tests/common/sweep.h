// What each collective moves for a requested size, and how its bandwidth is reported: the same
// element counts, alignment and bus-bandwidth factors as nccl-tests, so numbers compare directly.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace ccl::perf {

enum class Collective {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  SendRecv
};

struct CollectiveInfo {
  Collective coll;
  const char* name;    // "all_reduce"
  const char* binary;  // "all_reduce_perf"
  bool has_op;         // prints and loops over reduction ops
  bool has_root;       // loops over roots (-r)
  // busbw = algbw * factor(nranks): the bandwidth each link would need for the algorithm-optimal
  // transfer, so that it can be compared with the hardware's peak whatever nranks is.
  double (*bus_factor)(int nranks);
};

const CollectiveInfo& collective_info(Collective coll);

// Element counts of one operation, as nccl-tests' GetCollByteCount gives them.
struct Geometry {
  size_t send_count = 0;           // elements in the send buffer
  size_t recv_count = 0;           // elements in the receive buffer (what is checked)
  size_t param_count = 0;          // the count argument of the call
  size_t send_inplace_offset = 0;  // in-place: send = recv + rank * this (elements)
  size_t recv_inplace_offset = 0;  // in-place: recv = recv + rank * this (elements)
};

// `bytes` requested (one size of the sweep) for elements of `elt_size` bytes. Per-rank pieces of
// allgather, reducescatter and alltoall are rounded down to a multiple of 16 bytes, as nccl-tests
// does; the others use bytes / elt_size.
Geometry geometry(Collective coll, size_t bytes, size_t elt_size, int nranks);

// The "size" column: the larger of the send and receive buffers, in bytes.
size_t row_bytes(const Geometry& g, size_t elt_size);

// algbw in GB/s (1e9 bytes) for one operation of `g` taking `seconds`, and busbw from it.
double alg_bandwidth(Collective coll, const Geometry& g, size_t elt_size, int nranks,
                     double seconds);
double bus_bandwidth(Collective coll, double algbw, int nranks);

// The sizes of a sweep: min, then *factor (factor > 1) or +step, while <= max. Ends after
// `limit` entries at most (a guard against overflow or a zero step).
std::vector<size_t> size_sweep(size_t min_bytes, size_t max_bytes, size_t step_bytes,
                               size_t step_factor, size_t limit = 1 << 20);

// The sizes warmed up before a sweep: min, doubling, up to max (nccl-tests warms every size).
std::vector<size_t> warmup_sizes(size_t min_bytes, size_t max_bytes);

}  // namespace ccl::perf
