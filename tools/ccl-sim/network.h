// What the simulator's engine needs to know of a machine or cluster: the shared capacities a
// transfer occupies (a rank's copy engine, a host's NIC, a leaf switch's uplinks) and, for each
// ordered pair of ranks, the latency and the capacities on the way. The engine (engine.h) runs
// every rank's program over it; the cluster (cluster.h) builds one from a cluster description and
// a model of its links (model.h).
//
// Capacities are shared fairly: a transfer moves at the smallest share it gets on its way,
// min over its resources of capacity / (transfers using it), recomputed whenever a transfer
// starts or ends (a fluid model: no packets, no congestion control).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ccl::sim {

/// One shared capacity, in GB/s (10^9 bytes a second).
struct Resource {
  std::string name;  // "rank 3 tx", "nic 1 tx", "leaf 0 up": for --explain
  double gbps = 1;
  /// A CPU copying through memory (a core, a shared-memory port): its figure was measured with
  /// buffers in cache, and a call whose buffers are not runs it slower (SimOptions::memory_scale).
  bool memory = false;
};

/// The way from one rank to another: the latency of one message (paid once: the sender's share
/// before its bytes move, the rest after) and the resources its bytes use.
struct Route {
  static constexpr int kMaxResources = 8;
  double alpha_us = 0;
  /// The part of alpha_us the sender spends on each message before its bytes move (LogP's o:
  /// system calls, slot bookkeeping): its connection is busy for it and its send is done only
  /// after it. The rest of alpha_us follows the bytes, in flight.
  double send_us = 0;
  std::array<uint32_t, kMaxResources> resources{};
  int count = 0;
  /// The first `sender` resources are the sending side's (its port, its NIC, its leaf's uplink),
  /// the rest the receiving side's: a run over a quotient of symmetric ranks (engine.h) takes
  /// each side from the pair it stands for.
  int sender = 0;
  /// What kind of link it is, for reports ("shm", "nvlink", "net").
  const char* link = "";
  /// The receiver's core copies the bytes out as they arrive (shared memory: a CPU moves them at
  /// both ends), so a posted receive occupies it while they flow; a receive posted late copies
  /// them out afterwards.
  bool receiver_copies = false;
  void add(uint32_t resource) { resources[static_cast<size_t>(count++)] = resource; }
};

class Network {
 public:
  virtual ~Network() = default;
  virtual int nranks() const = 0;
  virtual const std::vector<Resource>& resources() const = 0;
  /// The route of a message from `from` to `to` (from != to).
  virtual Route route(int from, int to) const = 0;
  /// The resource a rank's local work (copies, reductions, the final division) runs on, and the
  /// bandwidth it has for each: its one thread does all of it, one after the other.
  virtual uint32_t core_of(int rank) const = 0;
  virtual double copy_gbps() const = 0;
  virtual double reduce_gbps() const = 0;
  /// The fixed cost of one collective call on a rank (API, planning, queueing), in us.
  virtual double call_overhead_us() const = 0;
  /// The same for a call on the direct path (no schedule: no planner, no executor).
  virtual double direct_overhead_us() const { return call_overhead_us(); }
  /// The rate of Resource::memory resources, relative to their figures, for a call whose
  /// buffers take `footprint_bytes` on each rank (1: as measured, in cache).
  virtual double memory_scale(uint64_t footprint_bytes) const {
    (void)footprint_bytes;
    return 1;
  }
  /// The smallest P such that moving every rank by P (mod nranks) maps the network onto itself
  /// (resources and routes alike); nranks when there is no such symmetry.
  virtual int symmetry_period() const { return nranks(); }
  /// Whether XOR with a multiple of symmetry_period() also maps the network onto itself (it
  /// needs nranks and the period to be powers of two).
  virtual bool xor_symmetric() const { return false; }
};

}  // namespace ccl::sim
