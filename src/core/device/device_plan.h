// The device program of one call (call/call.h) on a device world: the builder of its
// collective (algorithms/device/device_collectives.h), the reduction as the communicator's op
// says (avg, PreMulSum), and for allreduce the choice between one-shot and two-shot.
//
// The choice is a cost model, as the host tuner's (tuning/cost_model.h), in two figures: a
// stream operation's latency (a memory operation, a copy or a kernel launch as the GPU runs it)
// and the bandwidth of the memory the program reads and writes. Per rank, of S bytes (a chunk):
//   one-shot  n + 3 operations; 4 S through its own memory, (n - 1) S read from the peers
//   two-shot  2 n + 4 operations; 3 S + 3 S / n own, 2 (n - 1) / n S from the peers
// Ranks on one GPU share its memory (n times the traffic through one memory); ranks on GPUs
// with P2P read the others' memory over the link (the larger of local and remote traffic
// counts), at the figure of the slowest link between two of the ranks' GPUs (NVLink or PCIe:
// cuda_ipc.h's PeerLink). At 2 ranks both read S from the peer and one-shot always wins; at 4
// (8) ranks two-shot, which reads less of the peers' memory, wins from 8 (4) MiB over NVLink
// and from 512 (256) KiB over PCIe, where a peer's memory is 100 times slower. The figures
// below are the H100/H200 class's and PCIe Gen4 P2P's, not measured by ccl yet (no GPU has run
// it: scripts/device-check.sh prints the crossover it finds); CCL_PROTO=LL forces one-shot,
// CCL_PROTO=Simple two-shot, as they choose the host's direct allreduce.
#pragma once

#include "algorithms/device/device_collectives.h"
#include "core/call/call.h"
#include "core/call/reduction_ops.h"
#include "core/device/device_world.h"
#include "core/tuning/algo_selection.h"
#include "cuda/cuda_ipc.h"

namespace ccl {

struct DevicePlan {
  algo::device::Program program;
  DeviceBindings bindings;
  const char* algorithm = "direct";  // for the log and the flight recorder
};

struct DeviceLinks {
  double op_latency_us = 4.0;   // one stream operation, as the GPU runs it
  double memory_gbps = 2500.0;  // a GPU's own memory, read + write (HBM3e: 4.8 TB/s peak)
  double peer_gbps = 350.0;     // reading another GPU's memory (NVLink 4, one direction)

  // The figures of `link` (SameDevice and NVLink: the above; PCIe: 25 GB/s from a peer).
  static DeviceLinks of(cuda::PeerLink link);
};

algo::device::AllReduceAlgorithm choose_all_reduce(uint64_t bytes, int nranks, bool one_device,
                                                   const DeviceLinks& links,
                                                   const tune::Selection& selection);

// Throws cclInvalidArgument for what no program can do (a reduction without a kernel).
DevicePlan plan_device(const Call& call, const DeviceWorld& world, const ReductionOps& ops,
                       const tune::Selection& selection);

}  // namespace ccl
