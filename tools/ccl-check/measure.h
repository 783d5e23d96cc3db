// ccl-check's measurements, collective calls every rank makes together: one collective's time at
// one size (busbw as nccl-tests computes it), and the pairwise send/recv latency and bandwidth of
// a round of disjoint pairs.
#pragma once

#include <ccl/ccl.hpp>
#include <functional>
#include <string>
#include <vector>

#include "options.h"
#include "suspects.h"

namespace ccl_check {

struct SweepPoint {
  std::string collective;
  size_t bytes = 0;    // nccl-tests' "size" of the call
  double time_us = 0;  // the slowest rank's mean time per call, median of the repeats
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int runs = 0;         // repeats taken (more when they disagreed: Options::self_tolerance)
  bool correct = true;  // allreduce: every element equals the expected sum
};

/// nccl-tests' busbw factor: allreduce 2(n−1)/n, allgather, reducescatter, alltoall (n−1)/n,
/// broadcast and reduce 1.
double busbw_factor(const std::string& collective, int nranks);

/// The sizes run_sweep measures: o.min_bytes, times o.factor, up to o.max_bytes.
std::vector<size_t> sweep_sizes(const Options& o);

/// Every collective of o.collectives at every size of sweep_sizes(o); the same on every rank.
/// `on_point` (if set) is told each point before it is measured ("allreduce 64K").
std::vector<SweepPoint> run_sweep(ccl::Communicator& comm, const Options& o,
                                  const std::function<void(const std::string&)>& on_point = {});

/// A ring of all ranks: each sends o.pair_bytes to the next rank while it receives as much from
/// the previous one, all at once, o.pair_iters times. The bandwidth is per rank, at the slowest
/// rank's median transfer, to set beside the pairs measured alone: a ring well below its slowest
/// pair points at what only shows under load (a shared uplink, a host's memory bandwidth).
struct RingResult {
  size_t bytes = 0;
  double time_us = 0;  // the slowest rank's median time of one transfer
  double bandwidth_gbps = 0;
  int slowest_rank = -1;  // whose median was that time
};
RingResult measure_ring(ccl::Communicator& comm, const Options& o);

/// One round: each rank in `round` measures with its partner (8-byte ping-pong latency, then
/// o.pair_bytes both ways at once); the others wait. Every rank gets every pair's result.
std::vector<PairResult> measure_round(ccl::Communicator& comm, const std::vector<RankPair>& round,
                                      const Options& o);

}  // namespace ccl_check
